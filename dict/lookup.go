package dict

import "time"

// Lookup is one recorded getEntry.
type Lookup struct {
	EndToEndID  string
	Env         string
	PayerID     string
	KeyType     KeyType
	Policy      string
	Participant string
	// Status is the HTTP status of the answer (a lookup that got none is
	// not recorded).
	Status     int
	LookedUpAt time.Time
	// PaidAt is when a payment with the same EndToEndId was credited (zero
	// until then).
	PaidAt time.Time
}
