package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"
)

// Role is what a user of the admin pages may do. The zero value is
// RoleViewer: a user is read-only unless made an admin.
type Role uint8

const (
	// RoleViewer sees every page and the /api/ read endpoints; any action
	// that changes state answers 403.
	RoleViewer Role = iota
	RoleAdmin       // may also reset buckets, send and look up
)

// String returns "viewer" or "admin".
func (r Role) String() string {
	if r == RoleAdmin {
		return "admin"
	}
	return "viewer"
}

// parseRole is the inverse of String, ignoring case and spaces around.
func parseRole(s string) (Role, error) {
	for _, r := range []Role{RoleViewer, RoleAdmin} {
		if strings.EqualFold(strings.TrimSpace(s), r.String()) {
			return r, nil
		}
	}
	return 0, fmt.Errorf("web: role %q (want viewer or admin)", s)
}

// Credentials are one user's: a user name, either a password or a bcrypt
// hash of one, and a role. Server.Admin is always RoleAdmin, whatever its
// Role says; each of Server.Users has its own.
type Credentials struct {
	User     string
	Password string // compared in constant time
	// PasswordBcrypt, when set, is a bcrypt hash checked instead of
	// Password.
	PasswordBcrypt string
	Role           Role
}

// ParseUsers reads users from r: one entry per line, or several separated
// by commas; blank lines and lines starting with # are skipped. An entry is
//
//	NAME:ROLE:SECRET
//
// where ROLE is viewer or admin and SECRET a bcrypt hash ("$2a$", "$2b$"
// or "$2y$") or else a plain password (everything after the second ":"; it
// cannot hold a comma). A name listed twice is an error.
//
//	oncall:viewer:$2a$10$N9qo8uLOickgx2ZMRZoMye...
//	lead:admin:correct horse battery staple
func ParseUsers(r io.Reader) ([]Credentials, error) {
	return parseEntries(r, "users", parseUser, func(c Credentials) (string, string) {
		return c.User, fmt.Sprintf("user %q", c.User)
	})
}

func parseUser(entry string) (Credentials, error) {
	parts := strings.SplitN(entry, ":", 3)
	if len(parts) != 3 || strings.TrimSpace(parts[0]) == "" || parts[2] == "" {
		return Credentials{}, fmt.Errorf("want NAME:ROLE:SECRET")
	}
	role, err := parseRole(parts[1])
	if err != nil {
		return Credentials{}, fmt.Errorf("user %q: %w", parts[0], err)
	}
	c := Credentials{User: strings.TrimSpace(parts[0]), Role: role}
	if isBcrypt(parts[2]) {
		c.PasswordBcrypt = parts[2]
	} else {
		c.Password = parts[2]
	}
	return c, nil
}

// isBcrypt reports whether s looks like a bcrypt hash.
func isBcrypt(s string) bool {
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

// authenticator checks basic-auth credentials in constant time against
// every configured user; each user remembers the digest of the last pair
// bcrypt (slow on purpose) accepted for it. decoy is a bcrypt hash checked
// for an unknown name, which then costs what a wrong password costs.
type authenticator struct {
	accounts []*account
	decoy    []byte
}

// account is one user of the authenticator.
type account struct {
	name     string
	role     Role
	user     [32]byte                 // sha256 of the user name
	password [32]byte                 // sha256 of the password (plain mode)
	hash     []byte                   // bcrypt hash (bcrypt mode)
	accepted atomic.Pointer[[32]byte] // sha256(user, password) bcrypt accepted last
}

// newAuthenticator checks the users: each needs a name, a password or a
// valid bcrypt hash, and a name of its own. admin, when it has a name, is
// the first user and always RoleAdmin.
func newAuthenticator(admin Credentials, users []Credentials) (*authenticator, error) {
	all := users
	if admin.User != "" || len(users) == 0 {
		admin.Role = RoleAdmin
		all = append([]Credentials{admin}, users...)
	}
	a := &authenticator{}
	seen := make(map[string]bool)
	for _, c := range all {
		if c.User == "" {
			return nil, fmt.Errorf("web: admin credentials need a user name")
		}
		if seen[c.User] {
			return nil, fmt.Errorf("web: user %q is configured twice", c.User)
		}
		seen[c.User] = true
		acc := &account{name: c.User, role: c.Role, user: sha256.Sum256([]byte(c.User))}
		switch {
		case c.PasswordBcrypt != "":
			if _, err := bcrypt.Cost([]byte(c.PasswordBcrypt)); err != nil {
				return nil, fmt.Errorf("web: password hash of %q: %w", c.User, err)
			}
			acc.hash = []byte(c.PasswordBcrypt)
			if a.decoy == nil {
				a.decoy = acc.hash
			}
		case c.Password != "":
			acc.password = sha256.Sum256([]byte(c.Password))
		default:
			return nil, fmt.Errorf("web: user %q needs a password or a bcrypt hash", c.User)
		}
		a.accounts = append(a.accounts, acc)
	}
	return a, nil
}

// match returns the account named user, comparing the digest of user with
// every account's in constant time (no early exit), or nil.
func (a *authenticator) match(user string) *account {
	u := sha256.Sum256([]byte(user))
	var found *account
	for _, acc := range a.accounts {
		if subtle.ConstantTimeCompare(u[:], acc.user[:]) == 1 {
			found = acc
		}
	}
	return found
}

// check returns the user and role when user and password are a configured
// user's (else ""), in a time that tells nothing about how much of either
// matched.
func (a *authenticator) check(user, password string) (string, Role) {
	acc := a.match(user)
	if acc == nil {
		if a.decoy != nil {
			_ = bcrypt.CompareHashAndPassword(a.decoy, []byte(password))
		}
		return "", 0
	}
	if !acc.cheap(user, password) {
		if acc.hash == nil || bcrypt.CompareHashAndPassword(acc.hash, []byte(password)) != nil {
			return "", 0
		}
		pair := pairDigest(user, password)
		acc.accepted.Store(&pair)
	}
	return acc.name, acc.role
}

// cheap reports whether password is acc's when that is cheap to tell (in
// constant time): a plain password, or the pair bcrypt accepted last.
func (acc *account) cheap(user, password string) bool {
	if acc.hash == nil {
		p := sha256.Sum256([]byte(password))
		return subtle.ConstantTimeCompare(p[:], acc.password[:]) == 1
	}
	pair := pairDigest(user, password)
	ok := acc.accepted.Load()
	return ok != nil && subtle.ConstantTimeCompare(pair[:], ok[:]) == 1
}

// known is check without bcrypt (see cheap), for the inbound limiter to
// charge a user's own bucket before a slow check: the user, or "".
func (a *authenticator) known(user, password string) string {
	if acc := a.match(user); acc != nil && acc.cheap(user, password) {
		return acc.name
	}
	return ""
}

// pairDigest binds a user and a password in one digest (length-prefixed so
// that ("ab", "c") and ("a", "bc") differ).
func pairDigest(user, password string) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%d:%s:%s", len(user), user, password))
}
