package throttle

import "fmt"

// Severity grades how empty a bucket is, after seed 003's AlertSeverity:
// Healthy = 1, Medium, High, Critical. The zero value means "not known yet"
// (a bucket never written).
type Severity uint8

const (
	SeverityUnknown Severity = iota
	SeverityHealthy
	SeverityMedium
	SeverityHigh
	SeverityCritical
)

var severityNames = [...]string{"Unknown", "Healthy", "Medium", "High", "Critical"}

// String returns "Healthy", "Medium", "High", "Critical" or "Unknown".
func (s Severity) String() string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("Severity(%d)", uint8(s))
}

// Thresholds are the fill ratios, in percent of capacity, below which a
// bucket is Medium, High and Critical. They must satisfy
// 100 >= Medium >= High >= Critical >= 0.
type Thresholds struct {
	Medium, High, Critical int64
}

// DefaultThresholds are 50 %, 25 % and 10 %.
var DefaultThresholds = Thresholds{Medium: 50, High: 25, Critical: 10}

// Validate reports whether the thresholds are ordered and within 0..100.
func (t Thresholds) Validate() error {
	if !(100 >= t.Medium && t.Medium >= t.High && t.High >= t.Critical && t.Critical >= 0) {
		return fmt.Errorf("throttle: severity thresholds must satisfy 100 >= medium >= high >= critical >= 0, got %d/%d/%d", t.Medium, t.High, t.Critical)
	}
	return nil
}

// Of grades a balance of tokens out of capacity. A negative balance is
// Critical.
func (t Thresholds) Of(tokens, capacity int64) Severity {
	// tokens/capacity < pct/100, in integers.
	below := func(pct int64) bool { return tokens*100 < capacity*pct }
	switch {
	case tokens < 0 || below(t.Critical):
		return SeverityCritical
	case below(t.High):
		return SeverityHigh
	case below(t.Medium):
		return SeverityMedium
	}
	return SeverityHealthy
}
