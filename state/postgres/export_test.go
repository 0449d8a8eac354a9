package postgres

// MigrationSQL is the schema's migrations, for tests that build a
// database at an older version.
var MigrationSQL = migrations
