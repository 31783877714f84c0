package settings

import (
	"fmt"
	"os"
	"slices"

	"github.com/balde-throttle/balde/web"
)

// InboundConfig is the inbound limiter's configuration, nil when off, with
// the tokens of InboundTokensFile read now.
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
		IPLimit: c.InboundIPLimit, Window: c.InboundWindow, Block: c.InboundBlock, ClientLimit: c.InboundClientLimit,
		Tokens: tokens, Paths: c.InboundPaths, Exempt: c.InboundExempt, FailClosed: c.InboundFailClosed,
		TrustedProxies: c.TrustedProxies,
	}, nil
}
