package settings

import "github.com/balde-throttle/balde/web"

// InboundConfig is the inbound limiter's configuration, nil when off, with
// the tokens of InboundTokensFile read now (a *Error when they cannot be).
func (c Settings) InboundConfig() (*web.InboundConfig, error) {
	if c.InboundIPLimit == 0 {
		return nil, nil
	}
	tokens, err := withFile(c.InboundTokens, "BALDE_INBOUND_TOKENS_FILE", c.InboundTokensFile, web.ParseInboundTokens)
	if err != nil {
		return nil, err
	}
	return &web.InboundConfig{
		IPLimit: c.InboundIPLimit, Window: c.InboundWindow, Block: c.InboundBlock, ClientLimit: c.InboundClientLimit,
		Tokens: tokens, Paths: c.InboundPaths, Exempt: c.InboundExempt, FailClosed: c.InboundFailClosed,
		TrustedProxies: c.TrustedProxies,
	}, nil
}
