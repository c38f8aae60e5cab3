// Package clientagent holds the files the programs embed: the turn state
// machine (the one definition AWS and the local engine both run) and the
// workflow templates.
package clientagent

import (
	"embed"
	_ "embed"
)

// TurnStateMachine is statemachine/turn.asl.json, with ${…} placeholders
// for the function names (CloudFormation DefinitionSubstitutions).
//
//go:embed statemachine/turn.asl.json
var TurnStateMachine []byte

// Workflows holds the workflow templates under testdata/workflows.
//
//go:embed testdata/workflows/*.json
var Workflows embed.FS

// WorkflowsDir is the directory of Workflows holding the templates.
const WorkflowsDir = "testdata/workflows"
