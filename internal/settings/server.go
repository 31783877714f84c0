package settings

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// AdminLogin is the admin credential of a server: the one configured, or
// the password read from a file or made up (FindAdminLogin).
type AdminLogin struct {
	web.Credentials
	// File is where the password was read or kept ("" when configured in
	// AdminPassword or AdminPasswordBcrypt).
	File string
	// Generated: the password was made up now and kept in File; show it
	// once.
	Generated bool
}

// FindAdminLogin returns the admin credential the settings give: AdminUser
// with AdminPassword or AdminPasswordBcrypt when one is set; else the
// first line of AdminPasswordFile; else the password kept in
// DataDir/admin-password; else a new random one, written there (0600) and
// Generated. The admin is never open. Errors name the setting to fix
// (*Error), or say the password could not be kept.
func (c Settings) FindAdminLogin() (AdminLogin, error) {
	login := AdminLogin{Credentials: web.Credentials{User: c.AdminUser, Password: c.AdminPassword, PasswordBcrypt: c.AdminPasswordBcrypt}}
	if login.Password != "" || login.PasswordBcrypt != "" {
		return login, nil
	}
	if c.AdminPasswordFile != "" {
		b, err := os.ReadFile(c.AdminPasswordFile)
		if err != nil {
			return login, errorf("BALDE_ADMIN_PASSWORD_FILE: %v", err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		if login.Password = strings.TrimSpace(first); login.Password == "" {
			return login, errorf("BALDE_ADMIN_PASSWORD_FILE %s: the first line is empty", c.AdminPasswordFile)
		}
		login.File = c.AdminPasswordFile
		return login, nil
	}
	dir, err := c.ResolveDataDir()
	if err != nil {
		return login, err
	}
	login.File = filepath.Join(dir, "admin-password")
	if b, err := os.ReadFile(login.File); err == nil {
		if login.Password = strings.TrimSpace(string(b)); login.Password != "" {
			return login, nil
		}
	}
	login.Password, login.Generated = rand.Text(), true
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return login, fmt.Errorf("serve: keep the admin password: %w", err)
	}
	if err := os.WriteFile(login.File, []byte(login.Password+"\n"), 0o600); err != nil {
		return login, fmt.Errorf("serve: keep the admin password: %w", err)
	}
	return login, nil
}

// ResolveDataDir is where serve keeps what it generates: DataDir as given,
// else the SQLite database's directory, else the user's config directory's
// balde/ (a *Error when there is none).
func (c Settings) ResolveDataDir() (string, error) {
	if c.DataDir != "" {
		return c.DataDir, nil
	}
	if path, ok := SQLiteFile(c.DB); ok {
		return filepath.Dir(path), nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", errorf("serve: no BALDE_DATA_DIR and no user config directory: %v", err)
	}
	return filepath.Join(dir, "balde"), nil
}

// SQLiteFile is the file of a SQLite DSN; false for PostgreSQL, an
// in-memory database or a DSN that does not parse.
func SQLiteFile(dsn string) (string, bool) {
	engine, driverDSN, err := sqlstore.ParseDSN(dsn)
	if err != nil || engine != sqlstore.SQLite || strings.Contains(dsn, "mode=memory") {
		return "", false
	}
	path := sqlstore.SQLitePath(driverDSN)
	if path == ":memory:" || path == "" {
		return "", false
	}
	return path, true
}

// Server is eng.NewServer configured as balde serve runs it: the admin
// login of FindAdminLogin, the users with their roles of AllUsers, the
// trusted proxies, the /metrics token, the Go and process collectors (a
// process of its own), one log line per request and the pages' time zone.
func (c Settings) Server(eng *balde.Engine) (*web.Server, AdminLogin, error) {
	login, err := c.FindAdminLogin()
	if err != nil {
		return nil, login, err
	}
	users, err := c.AllUsers()
	if err != nil {
		return nil, login, err
	}
	s := eng.NewServer(c.Participant())
	s.Admin = login.Credentials
	s.Users = users
	s.TrustedProxies = c.TrustedProxies
	s.MetricsToken = c.MetricsToken
	s.RuntimeMetrics = true
	s.LogRequests = true
	s.TimeZone = c.TimeZone
	return s, login, nil
}

// DefaultActor is who a reset from a terminal names by default:
// $USER@hostname, $USER when the host name is unknown, or "cli" without
// $USER. getenv reads the environment (os.Getenv).
func DefaultActor(getenv func(string) string) string {
	user := getenv("USER")
	if user == "" {
		return "cli"
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return user + "@" + host
	}
	return user
}
