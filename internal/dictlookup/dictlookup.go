// Package dictlookup holds the files of balde dict-lookup: the lookups it
// reads (ReadLookupRequests: one Pix key per line, or key,payer CSV) and the
// results it writes (NewLookupRecord of each dict.BatchResult, written by a
// LookupWriter as CSV or JSON). The lookups themselves are dict.Batch's;
// internal/report words them for the terminal.
package dictlookup
