package settings

import (
	"fmt"
	"os"
	"slices"

	"github.com/balde-throttle/balde/web"
)

// InboundConfig is the inbound limiter's configuration from the settings,
// nil when it is off (InboundIPLimit 0): the limits, the paths, and the
// tokens of InboundTokens followed by those of InboundTokensFile, read
// now. A file that cannot be read or parsed is an error naming
// BALDE_INBOUND_TOKENS_FILE.
func (c Settings) InboundConfig() (*web.InboundConfig, error) {
	if c.InboundIPLimit == 0 {
		return nil, nil
	}
	tokens := slices.Clip(c.InboundTokens)
	if c.InboundTokensFile != "" {
		f, err := os.Open(c.InboundTokensFile)
		if err != nil {
			return nil, fmt.Errorf("BALDE_INBOUND_TOKENS_FILE: %w", err)
		}
		more, err := web.ParseInboundTokens(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("BALDE_INBOUND_TOKENS_FILE %s: %w", c.InboundTokensFile, err)
		}
		tokens = append(tokens, more...)
	}
	return &web.InboundConfig{
		IPLimit: c.InboundIPLimit,
		Window:  c.InboundWindow,
		Block:   c.InboundBlock,
		// A gateway's clients (Client, set by the gateway) each have
		// their own bucket.
		ClientLimit: c.InboundClientLimit,
		Tokens:      tokens,
		Paths:       c.InboundPaths,
		Exempt:      c.InboundExempt,
		FailClosed:  c.InboundFailClosed,
		// Middleware (the gateways) finds the client as the pages do.
		TrustedProxies: c.TrustedProxies,
	}, nil
}
