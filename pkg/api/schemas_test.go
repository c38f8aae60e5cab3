package api_test

import "github.com/clientagent/clientagent/pkg/schemacheck"

// These tests check tool arguments against their schemas, as the validate
// and api functions do.
func init() { schemacheck.Use() }
