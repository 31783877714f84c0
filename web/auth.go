package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Credentials are the admin's: a user name and either a password or a
// bcrypt hash of one. The admin is never open: Server.Open fails without a
// user and one of the two.
type Credentials struct {
	User string
	// Password is compared in constant time.
	Password string
	// PasswordBcrypt, when set, is a bcrypt hash ("$2a$...", "$2b$...")
	// checked instead of Password.
	PasswordBcrypt string
}

// authenticator checks basic-auth credentials in constant time. bcrypt is
// slow on purpose (tens of milliseconds), too slow for every request of a
// page and its stylesheet, so the digest of the last pair bcrypt accepted
// is remembered in memory and compared in constant time.
type authenticator struct {
	user     [32]byte // sha256 of the user name
	password [32]byte // sha256 of the password (plain mode)
	hash     []byte   // bcrypt hash (bcrypt mode)

	mu       sync.Mutex
	accepted [32]byte // sha256(user, password) bcrypt accepted last
	hasOK    bool
}

func newAuthenticator(c Credentials) (*authenticator, error) {
	if c.User == "" {
		return nil, fmt.Errorf("web: admin credentials need a user name")
	}
	a := &authenticator{user: sha256.Sum256([]byte(c.User))}
	switch {
	case c.PasswordBcrypt != "":
		if _, err := bcrypt.Cost([]byte(c.PasswordBcrypt)); err != nil {
			return nil, fmt.Errorf("web: admin password hash: %w", err)
		}
		a.hash = []byte(c.PasswordBcrypt)
	case c.Password != "":
		a.password = sha256.Sum256([]byte(c.Password))
	default:
		return nil, fmt.Errorf("web: admin credentials need a password or a bcrypt hash")
	}
	return a, nil
}

// check reports whether user and password are the admin's. Both are always
// compared (digests of equal length, constant time), so the time taken
// tells nothing about which one was wrong or how much of it matched.
func (a *authenticator) check(user, password string) bool {
	u := sha256.Sum256([]byte(user))
	userOK := subtle.ConstantTimeCompare(u[:], a.user[:])
	if a.hash == nil {
		p := sha256.Sum256([]byte(password))
		return userOK&subtle.ConstantTimeCompare(p[:], a.password[:]) == 1
	}
	pair := pairDigest(user, password)
	a.mu.Lock()
	cached := a.hasOK && subtle.ConstantTimeCompare(pair[:], a.accepted[:]) == 1
	a.mu.Unlock()
	if cached {
		return userOK == 1
	}
	if bcrypt.CompareHashAndPassword(a.hash, []byte(password)) != nil || userOK != 1 {
		return false
	}
	a.mu.Lock()
	a.accepted, a.hasOK = pair, true
	a.mu.Unlock()
	return true
}

// known is check without bcrypt: true when the pair is the admin's and
// that is cheap to tell (a plain password, or the pair bcrypt accepted
// last); false when it is not, or only bcrypt could tell. The inbound
// limiter uses it to charge the admin's own bucket, leaving a slow check
// to run after the per-IP limit.
func (a *authenticator) known(user, password string) bool {
	if a.hash == nil {
		return a.check(user, password)
	}
	u := sha256.Sum256([]byte(user))
	pair := pairDigest(user, password)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hasOK && subtle.ConstantTimeCompare(pair[:], a.accepted[:])&subtle.ConstantTimeCompare(u[:], a.user[:]) == 1
}

// pairDigest binds a user and a password in one digest (length-prefixed so
// that ("ab", "c") and ("a", "bc") differ).
func pairDigest(user, password string) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s:%s", len(user), user, password)
	var out [32]byte
	h.Sum(out[:0])
	return out
}
