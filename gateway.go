package balde

import (
	"cmp"
	"errors"
	"net/http"
	"time"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/web"
)

// DictGateway is web.NewDictGateway for Config.Dict: the DICT API proxied to
// its BaseURL (GET /policies/ to its PoliciesURL) with its HTTP transport
// and participant, through the engine's DICT client's meter, with cfg's
// Authenticate (required: web.GatewayClients.Authenticate, or the
// application's own) and Signer; the rest of cfg is the engine's (its
// audit trail and metrics). It serves the gateway's routes and nothing
// else: limit its clients with Inbound().Middleware (InboundConfig.Client
// charges each client its own bucket), mount OpsHandler beside it for
// /metrics and the probes. Without Config.Dict, or with a cfg web refuses,
// it is a *ConfigError.
func (e *Engine) DictGateway(cfg web.DictGatewayConfig) (http.Handler, error) {
	if e.dict == nil {
		return nil, &ConfigError{Setting: "Dict", Err: errors.New("the engine has no DICT client (Config.Dict)")}
	}
	c := e.dictConfig
	if hc, _ := c.HTTP(); hc != nil { // checked by Open
		cfg.Base = hc.Transport
	}
	cfg.Target, cfg.PoliciesURL, cfg.Participant = c.BaseURL, c.PoliciesURL, c.Participant
	cfg.Meter, cfg.Records, cfg.Payments = e.dict.Meter(), e.records, e.dict
	cfg.Audit, cfg.Metrics, cfg.Logger = e.audit, e.metrics(), e.logger.WithGroup("gateway")
	g, err := web.NewDictGateway(cfg)
	if err != nil {
		return nil, &ConfigError{Setting: "Dict", Err: err}
	}
	return g, nil
}

// SifenGateway is web.NewSifenGateway over the engine's SIFEN sender (its RUC
// gates shared through the database) with cfg's Sender, Client, Audit,
// Metrics and Logger the engine's when nil; cfg.Authenticate is required
// (see DictGateway). It serves the gateway's routes and nothing else. A
// request held for its RUC's interval moves its write deadline
// (web.NewHTTPServer's is 60 s) to the end of its hold. Without
// Config.Sifen, or with a cfg web refuses, it is a *ConfigError.
func (e *Engine) SifenGateway(cfg web.SifenGatewayConfig) (http.Handler, error) {
	if cfg.Sender = cmp.Or(cfg.Sender, e.sender); cfg.Sender == nil {
		return nil, &ConfigError{Setting: "Sifen", Err: errors.New("the engine has no SIFEN sender (Config.Sifen)")}
	}
	cfg.Client, cfg.Metrics = cmp.Or(cfg.Client, e.sifenClient), cmp.Or(cfg.Metrics, e.metrics())
	cfg.Logger, cfg.Audit = cmp.Or(cfg.Logger, e.logger.WithGroup("gateway")), cmp.Or[audit.Store](cfg.Audit, e.audit)
	g, err := web.NewSifenGateway(cfg)
	if err != nil {
		return nil, &ConfigError{Setting: "Sifen", Err: err}
	}
	hold := cmp.Or(cfg.Hold, web.DefaultSifenGatewayHold)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold > 0 {
			// The hold, then SIFEN's answer (its client's own bound).
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(hold + time.Minute))
		}
		g.ServeHTTP(w, r)
	}), nil
}
