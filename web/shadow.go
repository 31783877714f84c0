package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/throttle"
)

// shadowSwitch turns a policy's shadow mode on and off (balde.Engine's):
// a policy in shadow mode decides as usual and records its refusals, but
// admits (docs/decisions/0200). CheckShadow says, changing nothing,
// whether the policy may be in shadow mode: a DICT or SIFEN mirror policy
// may not.
type shadowSwitch interface {
	CheckShadow(policy string) error
	SetShadow(ctx context.Context, policy string, on bool) error
}

// switchShadow is POST /admin/policies/{policy}/shadow with shadow=on or
// off and reason= (required when the audit trail is on): it puts the
// policy in shadow mode or back to enforcing (Server.Shadows), recorded
// in the audit trail, then redirects (303) to the bucket page it came
// from (env= and identifier=) or to the policy's buckets. A DICT or SIFEN
// mirror policy is a 400 and changes nothing.
func (s *Server) switchShadow(w http.ResponseWriter, r *http.Request) error {
	vars, err := pathVars(r)
	if err != nil {
		return err
	}
	policy := vars["policy"]
	shadow := r.PostForm.Get("shadow")
	if shadow != "on" && shadow != "off" {
		return fmt.Errorf("%w: shadow must be on or off", errBadRequest)
	}
	on := shadow == "on"
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if s.Audit != nil && reason == "" {
		return fmt.Errorf("%w: a shadow switch needs a reason, recorded in the audit trail", errBadRequest)
	}
	if err := s.Shadows.CheckShadow(policy); err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if err := s.Shadows.SetShadow(r.Context(), policy, on); err != nil {
		return err
	}
	info := requestInfoFrom(r.Context())
	info.outcome = audit.ShadowOutcome(on)
	s.Logger.Info("shadow mode switched", slog.String("policy", policy), slog.Bool("shadow", on),
		slog.String("user", info.user), slog.String("reason", reason))
	back := s.pathWithQuery("adminBuckets", url.Values{"policy": {policy}})
	if k := (throttle.Key{Policy: policy, Env: r.PostForm.Get("env"), Identifier: r.PostForm.Get("identifier")}); k.Validate() == nil {
		back = s.pathWithQuery("adminBucket", url.Values{"shadow": {shadow}},
			"policy", k.Policy, "env", k.Env, "identifier", k.Identifier)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}
