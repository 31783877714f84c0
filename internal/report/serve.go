package report

import (
	"cmp"
	"fmt"
	"io"

	"github.com/balde-throttle/balde/devsims"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/sifen"
)

// WriteServeBanners says where serve's DICT, SIFEN and server are, and
// the admin's password when made up now; category "" is not learned.
func WriteServeBanners(w io.Writer, cfg settings.Settings, sims *devsims.Simulators, category, url string, login settings.AdminLogin) {
	if sims.Dict != nil {
		fmt.Fprintf(w, "balde: DICT simulator on %s (%d sample keys, category %s; set BALDE_DICT_URL for a real DICT)\n",
			sims.Dict.URL(), sims.Entries, cmp.Or(category, "H (strictest, not learned)"))
	} else {
		fmt.Fprintf(w, "balde: DICT at %s\n", cfg.DictURL)
	}
	if sims.Sifen != nil {
		fmt.Fprintf(w, "balde: SIFEN simulator on %s (set BALDE_SIFEN_URL=official for SIFEN)\n", sims.SifenURL)
	} else if cfg.SifenURL == settings.SifenOfficial {
		fmt.Fprintf(w, "balde: SIFEN at its official endpoints (%s, %s)\n", sifen.TestURL, sifen.ProdURL)
	} else {
		fmt.Fprintf(w, "balde: SIFEN at %s\n", cfg.SifenURL)
	}
	fmt.Fprintf(w, "balde: listening on %s\n", url)
	switch {
	case login.Generated:
		fmt.Fprintf(w, "balde: admin user %q, generated password (shown once, kept in %s; set BALDE_ADMIN_PASSWORD or BALDE_ADMIN_PASSWORD_FILE to choose one): %s\n",
			cfg.AdminUser, login.File, login.Password)
	case login.File != "":
		fmt.Fprintf(w, "balde: admin user %q, password in %s\n", cfg.AdminUser, login.File)
	}
}
