-- Reverts 0004: drops the DICT's lookups and participants (package dict).
DROP TABLE balde_dict_participants;
DROP TABLE balde_dict_lookups;
