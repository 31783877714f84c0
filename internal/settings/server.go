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

// AdminLogin is a server's admin credential (FindAdminLogin), File where
// its password was read or kept, Generated when made up now (show it once).
type AdminLogin struct {
	web.Credentials
	File      string
	Generated bool
}

// FindAdminLogin returns AdminUser with AdminPassword or
// AdminPasswordBcrypt, else AdminPasswordFile's first line, else the
// password kept in DataDir/admin-password, else a new one kept there.
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

// ResolveDataDir is DataDir, else the SQLite database's directory, else
// the user's config directory's balde/.
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

// SQLiteFile is the file of a SQLite DSN, false for any other.
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

// Server is eng.NewServer configured as balde serve runs it.
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
	s.Admin, s.Users, s.TrustedProxies, s.MetricsToken = login.Credentials, users, c.TrustedProxies, c.MetricsToken
	s.RuntimeMetrics, s.LogRequests, s.TimeZone = true, true, c.TimeZone
	return s, login, nil
}

// DefaultActor is who a reset from a terminal names: $USER@hostname,
// $USER, or "cli" without $USER.
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
