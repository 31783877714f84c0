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
	Status      int // of the answer (a lookup that got none is not recorded)
	LookedUpAt  time.Time
	PaidAt      time.Time // when a payment with its EndToEndId was credited, or zero
}
