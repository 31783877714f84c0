package dictlookup

var ErrLookupFormat = errLookupFormat

const LookupSent = lookupSent
