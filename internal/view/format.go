package view

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/throttle"
)

// FormatRefillIn is a policy's refill in tr's language: "2/min (em degraus)".
func FormatRefillIn(tr *i18n.Printer, p throttle.Policy) string {
	switch p.Refill {
	case throttle.RefillStepwise:
		return tr.Sprintf("%s (stepwise)", rateIn(tr, p))
	case throttle.RefillRolling:
		return tr.Sprintf("%s (sliding window)", rateIn(tr, p))
	}
	return rateIn(tr, p)
}

// rateIn is throttle.Policy.Rate in tr's language: "25.000/min".
func rateIn(tr *i18n.Printer, p throttle.Policy) string {
	return tr.Int(p.RefillTokens) + RatePeriod(p)
}

// RatePeriod is the "/min" of a policy's Rate.
func RatePeriod(p throttle.Policy) string {
	return strings.TrimPrefix(p.Rate(), strconv.FormatInt(p.RefillTokens, 10))
}

// FormatPolicyIn is throttle.Policy.String in tr's language, e.g.
// "ENTRIES_READ_USER_ANTISCAN: 2/min (capacidade 100, em degraus)".
func FormatPolicyIn(tr *i18n.Printer, p throttle.Policy) string {
	parts := []string{tr.Sprintf("capacity %d", p.Capacity), tr.Text(p.Refill.String())}
	if p.MinInterval > 0 {
		parts = append(parts, tr.Sprintf("every %s at most", p.MinInterval))
	}
	if p.BlockFor > 0 {
		parts = append(parts, tr.Sprintf("block %s", p.BlockFor))
	}
	if p.FailMode == throttle.FailOpen {
		parts = append(parts, tr.Text("fail open"))
	}
	return fmt.Sprintf("%s: %s (%s)", p.Name, rateIn(tr, p), strings.Join(parts, ", "))
}

// FormatBucketWaitIn renders a bucket's waits in tr's language: "blocked
// 4m12s, cooldown 8s", "refills in 42s", or "" when it admits now.
func FormatBucketWaitIn(tr *i18n.Printer, st throttle.BucketState) string {
	var waits []string
	switch {
	case st.BlockLeft > 0 && st.BlockLevel > 0:
		waits = append(waits, tr.Sprintf("blocked %s (block %d in a row)", FormatWait(st.BlockLeft), st.BlockLevel))
	case st.BlockLeft > 0:
		waits = append(waits, tr.Sprintf("blocked %s", FormatWait(st.BlockLeft)))
	}
	switch {
	case st.CooldownLeft > 0 && st.UntilReleased(st.At) > 0:
		waits = append(waits, tr.Sprintf("cooldown %s (a request on the wire)", FormatWait(st.CooldownLeft)))
	case st.CooldownLeft > 0:
		waits = append(waits, tr.Sprintf("cooldown %s", FormatWait(st.CooldownLeft)))
	}
	if !st.Orphan && st.RetryAfter > max(st.BlockLeft, st.CooldownLeft) { // refill is the longest wait
		waits = append(waits, tr.Sprintf("refills in %s", FormatWait(st.RetryAfter)))
	}
	return strings.Join(waits, ", ")
}

// FormatWait renders a wait for people: "4m12s", "8s", "0.35s".
func FormatWait(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < 10*time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// WhenIn is t shown by show (tr.Zoned, tr.Time) and how long before now
// it was, in tr's language: "… (4s ago)"; "never" for the zero time.
func WhenIn(tr *i18n.Printer, show func(time.Time) string, t, now time.Time) string {
	if t.IsZero() {
		return tr.Sprintf("never")
	}
	if ago := now.Sub(t); ago >= 0 {
		return show(t) + " (" + tr.Sprintf("%s ago", FormatWait(ago)) + ")"
	}
	return show(t)
}

// Seconds is d in seconds, rounded to the millisecond, for JSON.
func Seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}
