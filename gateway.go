package balde

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/balde-throttle/balde/web"
)

// DictGatewayHandler is the whole handler of "balde gateway dict": the
// DICT API (/api/v2/…) and the payment endpoint proxied to s.DictURL
// through the engine's DICT client's meter (web.DictGateway), behind the
// inbound limiter, with /metrics and the probes (OpsHandler, protected by
// s.MetricsToken). The engine must have been opened with a DICT client
// (Config.Dict). httpClient's transport carries the requests to the DICT
// (nil: the default transport): NewDictHTTPClient's, for mutual TLS. A
// gateway configuration web refuses is a *SettingError ("gateway dict:
// …").
func (e *Engine) DictGatewayHandler(s Settings, httpClient *http.Client, logger *slog.Logger) (http.Handler, error) {
	if e.dict == nil {
		return nil, &ConfigError{Setting: "Dict", Err: errors.New("the engine has no DICT client (Config.Dict)")}
	}
	if logger == nil {
		logger = e.logger
	}
	var base http.RoundTripper
	if httpClient != nil {
		base = httpClient.Transport
	}
	g, err := web.NewDictGateway(web.DictGatewayConfig{
		Target: s.DictURL, PoliciesURL: s.DictPoliciesURL, Participant: s.DictParticipant,
		Meter: e.dict.Meter(), Records: e.records, Payments: e.dict, Base: base,
		Logger: logger.WithGroup("gateway"),
	})
	if err != nil {
		return nil, settingError("gateway dict: %v", err)
	}
	return e.gatewayOps(s, g)
}

// SifenGatewayHandler is the whole handler of "balde gateway sifen":
// web.SifenGateway over the engine's SIFEN sender (its RUC gates shared
// through the database with serve and sifen-send), behind the inbound
// limiter, with /metrics and the probes (OpsHandler). cfg.Sender is the
// engine's when nil, and cfg.Logger its logger's "gateway" group. A
// gateway configuration web refuses is a *SettingError ("gateway sifen:
// …").
func (e *Engine) SifenGatewayHandler(s Settings, cfg web.SifenGatewayConfig) (http.Handler, error) {
	if cfg.Sender == nil {
		cfg.Sender = e.sender
	}
	if cfg.Sender == nil {
		return nil, &ConfigError{Setting: "Sifen", Err: errors.New("the engine has no SIFEN sender (Config.Sifen)")}
	}
	if cfg.Logger == nil {
		cfg.Logger = e.logger.WithGroup("gateway")
	}
	g, err := web.NewSifenGateway(cfg)
	if err != nil {
		return nil, settingError("gateway sifen: %v", err)
	}
	return e.gatewayOps(s, g)
}

// gatewayOps serves api behind the inbound limiter with /metrics and the
// probes, as s configures them.
func (e *Engine) gatewayOps(s Settings, api http.Handler) (http.Handler, error) {
	return e.OpsHandler(api, OpsOptions{Participant: s.DictParticipant, TrustedProxies: s.TrustedProxies, MetricsToken: s.MetricsToken})
}
