package sqlitedriver

// Driver is the package's sqlstore.Driver, for its tests.
var Driver = sqliteDriver{}
