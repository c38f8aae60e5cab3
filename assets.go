// Package clientagent holds the files the programs embed: the turn's two
// state machines (the definitions AWS and the local engine both run) and
// the workflow templates.
package clientagent

import (
	"embed"
	_ "embed"
)

// TurnStateMachine is statemachine/turn.asl.json, the STANDARD execution of
// a turn, with ${…} placeholders for the function names and the loop's
// state machine (CloudFormation DefinitionSubstitutions).
//
//go:embed statemachine/turn.asl.json
var TurnStateMachine []byte

// LoopStateMachine is statemachine/loop.asl.json, the EXPRESS child that
// runs a turn's loop, with ${…} placeholders for the function names.
//
//go:embed statemachine/loop.asl.json
var LoopStateMachine []byte

// Workflows holds the workflow templates under testdata/workflows.
//
//go:embed testdata/workflows/*.json
var Workflows embed.FS

// WorkflowsDir is the directory of Workflows holding the templates.
const WorkflowsDir = "testdata/workflows"
