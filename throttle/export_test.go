package throttle

// Grade is Thresholds.grade, for the tests of severity.
var Grade = Thresholds.grade
