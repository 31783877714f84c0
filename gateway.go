package balde

import (
	"errors"
	"net/http"
	"time"

	"github.com/balde-throttle/balde/web"
)

// DictGateway is the DICT API (/api/v2/…, and the payment credit
// endpoint) proxied to Config.Dict's BaseURL (GET /policies/ to its
// PoliciesURL) through the engine's DICT client's meter, with the
// client's HTTP transport (its mutual TLS): web.DictGateway for
// Config.Dict's participant. It serves the gateway's routes and nothing
// else: limit its clients with Inbound().Middleware, and mount OpsHandler
// beside it for /metrics and the probes. The engine must have been opened
// with Config.Dict (a *ConfigError otherwise).
func (e *Engine) DictGateway() (http.Handler, error) {
	if e.dict == nil {
		return nil, &ConfigError{Setting: "Dict", Err: errors.New("the engine has no DICT client (Config.Dict)")}
	}
	c := e.dictConfig
	var base http.RoundTripper
	if hc, _ := dictHTTPClient(c); hc != nil { // checked by Open
		base = hc.Transport
	}
	g, err := web.NewDictGateway(web.DictGatewayConfig{
		Target: c.BaseURL, PoliciesURL: c.PoliciesURL, Participant: c.Participant,
		Meter: e.dict.Meter(), Records: e.records, Payments: e.dict, Base: base,
		Logger: e.logger.WithGroup("gateway"),
	})
	if err != nil {
		return nil, &ConfigError{Setting: "Dict", Err: err}
	}
	return g, nil
}

// SifenGateway is web.SifenGateway over the engine's SIFEN sender (its RUC
// gates shared through the database with serve and sifen-send) and
// Config.Sifen's client: cfg.Sender is the engine's when nil, cfg.Client
// the engine's *sifen.Client when nil, cfg.Logger the engine's logger's
// "gateway" group. It serves the gateway's routes and nothing else (see
// DictGateway). A request held for its RUC's interval may answer after
// web.NewHTTPServer's write timeout: its own write deadline is moved to
// the end of its hold. A configuration web refuses, or an engine without
// a sender, is a *ConfigError.
func (e *Engine) SifenGateway(cfg web.SifenGatewayConfig) (http.Handler, error) {
	if cfg.Sender == nil {
		cfg.Sender = e.sender
	}
	if cfg.Sender == nil {
		return nil, &ConfigError{Setting: "Sifen", Err: errors.New("the engine has no SIFEN sender (Config.Sifen)")}
	}
	if cfg.Client == nil {
		cfg.Client = e.sifenClient
	}
	if cfg.Logger == nil {
		cfg.Logger = e.logger.WithGroup("gateway")
	}
	g, err := web.NewSifenGateway(cfg)
	if err != nil {
		return nil, &ConfigError{Setting: "Sifen", Err: err}
	}
	hold := cfg.Hold
	if hold == 0 {
		hold = web.DefaultSifenGatewayHold
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold > 0 {
			// The hold, then SIFEN's answer (its client's own bound).
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(hold + time.Minute))
		}
		g.ServeHTTP(w, r)
	}), nil
}
