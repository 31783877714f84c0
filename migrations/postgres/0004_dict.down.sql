-- Reverts 0004: drops the DICT's lookups and participants (package dict).
DROP TABLE dict_participants;
DROP TABLE dict_lookups;
