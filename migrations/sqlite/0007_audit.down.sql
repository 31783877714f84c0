-- Reverts 0007: drops the operators' audit trail (package audit).
DROP TABLE balde_audit;
