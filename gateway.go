package balde

import (
	"errors"
	"net/http"
	"time"

	"github.com/balde-throttle/balde/web"
)

// DictGateway is web.DictGateway for Config.Dict: the DICT API proxied to
// its BaseURL (GET /policies/ to its PoliciesURL) with its HTTP transport
// and participant, through the engine's DICT client's meter. It serves the
// gateway's routes and nothing else: limit its clients with
// Inbound().Middleware, mount OpsHandler beside it for /metrics and the
// probes. Without Config.Dict it is a *ConfigError.
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
// gates shared through the database) with cfg's Sender, Client and Logger
// the engine's when nil. It serves the gateway's routes and nothing else
// (see DictGateway). A request held for its RUC's interval moves its write
// deadline (web.NewHTTPServer's is 60 s) to the end of its hold. Without
// Config.Sifen, or with a cfg web refuses, it is a *ConfigError.
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
