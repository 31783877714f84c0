package throttle

// RegradeAll is (*Limiter).regradeAll, for the tests of severity.
var RegradeAll = (*Limiter).regradeAll

// Grade is Thresholds.grade, for the tests of severity.
var Grade = Thresholds.grade
