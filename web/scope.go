package web

import (
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// Scopes returns a Server.Scope for balde's policies: what one bucket
// belongs to. DICT policies say PSP (the participant) or USER (an end
// user) from catalog; SIFEN's says RUC (an issuer in an environment); the
// inbound limiter's say IP or TOKEN. Other
// policies have no scope ("").
func Scopes(catalog *dict.Catalog) func(throttle.Key) string {
	return func(k throttle.Key) string {
		switch k.Policy {
		case sifen.PolicyRecepcionLote:
			return "RUC"
		case PolicyInboundIP:
			return "IP"
		case policyInboundToken:
			return "TOKEN"
		}
		if catalog != nil {
			if spec, ok := catalog.Spec(k.Policy); ok {
				return string(spec.Scope)
			}
		}
		return ""
	}
}
