// Package audit is the operators' audit trail: who did what, when and why,
// for every action that changes state from the admin pages or the CLI;
// audit/auditsql keeps it in SQL. A row is written after its action,
// whatever came of it (the outcome says), refusals and failures included.
package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Action names what an operator did.
type Action string

const (
	// ActionReset: a bucket filled, its cooldown and block cleared. A reason
	// is required.
	ActionReset Action = "reset"
	// ActionSifenSend: one document sent from the Documents page.
	ActionSifenSend Action = "sifen-send"
	// ActionSifenSendAll: every draft of a RUC sent ("Send all drafts").
	ActionSifenSendAll Action = "sifen-send-all"
	// ActionDictLookup: a Pix key looked up from the DICT lookup form.
	ActionDictLookup Action = "dict-lookup"
	// ActionGateway: a gateway client's request that changes state at the
	// DICT or SIFEN, accepted or refused; User is "gateway:" and the
	// client's name, Target fields ("service=siRecepLoteDE&ruc=80069563&env=test&des=3").
	ActionGateway Action = "gateway"
	// ActionSifenOverride: a document left in "sending" made sendable again
	// after SIFEN answered 0420 by CDC (docs/decisions/0210), or refused;
	// Target is the document's id. A reason is required.
	ActionSifenOverride Action = "sifen-override"
	// ActionDenied: an action a viewer attempted, refused (403) before
	// anything was done; Target "action=sifen-send&target=12"
	// (docs/decisions/0141).
	ActionDenied Action = "denied"
	// ActionShadow: a policy put in shadow mode or back to enforcing; Target
	// is the policy, Outcome ShadowOutcome. A reason is required.
	ActionShadow Action = "shadow"
)

// Actions lists every action, in the order the Audit page offers them.
var Actions = []Action{ActionReset, ActionShadow, ActionSifenSend, ActionSifenSendAll, ActionSifenOverride, ActionDictLookup, ActionGateway, ActionDenied}

// ParseAction reads an action's name ("reset", ...).
func ParseAction(s string) (Action, error) {
	if slices.Contains(Actions, Action(s)) {
		return Action(s), nil
	}
	return "", fmt.Errorf("%w: unknown action %q (want reset, shadow, sifen-send, sifen-send-all, sifen-override, dict-lookup, gateway or denied)", ErrInvalid, s)
}

// ErrInvalid is an entry or query that cannot be stored or run;
// ErrReasonRequired, wrapping it, an action missing its reason.
var (
	ErrInvalid        = errors.New("audit: invalid")
	ErrReasonRequired = fmt.Errorf("%w: a reset, a shadow switch or an override needs a reason", ErrInvalid)
)

// MaxField is the longest user, target, reason or outcome kept, in bytes:
// Validate refuses a longer user or reason, Record clips the others.
const MaxField = 500

// CLIUser is how the CLI names its operator: "cli:" and the OS user.
func CLIUser(osUser string) string {
	return "cli:" + cmp.Or(osUser, "unknown")
}

// Entry is one recorded action.
type Entry struct {
	// ID orders entries by insertion and At is when the action was taken
	// (both set by the Store; At only when zero).
	ID int64
	At time.Time
	// User is the admin user who acted, or CLIUser for the CLI.
	User   string
	Action Action
	// Target is what the action was on, as data, not words: a bucket key,
	// a document's id ("12"), fields ("ruc=80069563&env=test").
	Target string
	// Reason is why, as the operator typed it.
	Reason string
	// Outcome is what came of it, as URL-encoded fields the Audit page
	// renders in the reader's language ("before=3&after=10",
	// "status=429&refused=POLICY/env/id"); free text is shown as is.
	Outcome string
}

// ShadowOutcome is the Outcome of a shadow switch: "shadow=on" or
// "shadow=off".
func ShadowOutcome(on bool) string {
	if on {
		return "shadow=on"
	}
	return "shadow=off"
}

// ResetOutcome is the Outcome of a reset from before to after tokens.
func ResetOutcome(before, after int64) string {
	return fmt.Sprintf("before=%d&after=%d", before, after)
}

// OverrideOutcome is the Outcome of a SIFEN override after SIFEN answered
// code: "code=0420&result=overridden" when done, else
// "auth=…&code=0422&result=found" (SIFEN had the DE).
func OverrideOutcome(code, authNumber string, done bool) string {
	q := url.Values{"code": {code}, "result": {"found"}}
	if done {
		q.Set("result", "overridden")
	}
	if authNumber != "" {
		q.Set("auth", authNumber)
	}
	return q.Encode()
}

// Validate reports whether e can be recorded: a user, a known action, a
// reason where required, no user or reason longer than MaxField.
func (e Entry) Validate() error {
	switch {
	case strings.TrimSpace(e.User) == "":
		return fmt.Errorf("%w: an entry needs a user", ErrInvalid)
	case len(e.User) > MaxField || len(e.Reason) > MaxField:
		return fmt.Errorf("%w: user or reason longer than %d bytes", ErrInvalid, MaxField)
	}
	if _, err := ParseAction(string(e.Action)); err != nil {
		return err
	}
	if (e.Action == ActionReset || e.Action == ActionShadow || e.Action == ActionSifenOverride) && strings.TrimSpace(e.Reason) == "" {
		return ErrReasonRequired
	}
	return nil
}

// Clip shortens s to at most MaxField bytes on a rune boundary.
func Clip(s string) string {
	if len(s) <= MaxField {
		return s
	}
	s = s[:MaxField-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// Query selects entries, newest first.
type Query struct {
	// User and Action, when set, keep only that user's or action's; Before,
	// when > 0, the entries with an ID below it.
	User   string
	Action Action
	Before int64
	// Limit is the page size, 1..MaxLimit; 0 is DefaultLimit.
	Limit int
}

// Page sizes of a Query.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Store keeps the audit trail. Implementations are safe for concurrent use.
type Store interface {
	// Record validates e, stamps At when zero, clips Target and Outcome,
	// and returns the entry stored.
	Record(ctx context.Context, e Entry) (Entry, error)
	// List returns the entries q selects, highest ID first. An invalid
	// query wraps ErrInvalid.
	List(ctx context.Context, q Query) ([]Entry, error)
	// Prune deletes up to limit entries older than before (by At) and
	// returns how many went.
	Prune(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Normalize checks q and fills its default limit.
func (q Query) Normalize() (Query, error) {
	if q.Action != "" {
		if _, err := ParseAction(string(q.Action)); err != nil {
			return q, err
		}
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 0 || q.Limit > MaxLimit:
		return q, fmt.Errorf("%w: limit %d not in 1..%d", ErrInvalid, q.Limit, MaxLimit)
	}
	if q.Before < 0 {
		return q, fmt.Errorf("%w: before %d is negative", ErrInvalid, q.Before)
	}
	return q, nil
}
