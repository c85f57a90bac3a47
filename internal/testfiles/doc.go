// Package testfiles unpacks the data dirs that tests keep as fixtures
// (testdata/*.tgz: a data dir an earlier version wrote), for the tests of
// several packages.
package testfiles
