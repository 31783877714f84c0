-- Shadow mode per policy (docs/decisions/0200): a policy whose shadow is 1
-- decides as usual but admits what it would refuse, recording the would-be
-- refusal (ledger reasons 11 shadow-empty, 12 shadow-cooldown, 13
-- shadow-blocked). Only an application's own policies and the inbound
-- limiter's rules; the DICT and SIFEN mirrors never. A row may name a
-- policy no bucket uses yet. Turning it on or off is audited (action
-- "shadow").
ALTER TABLE balde_policies ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0;
