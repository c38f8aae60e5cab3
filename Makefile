# clientagent — the two commands: `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
FUNCTIONS := api llmstep validate invoke append await events demoagents

.PHONY: run test test-go test-slow test-race deps npm build lint fuzz bench clean eval

run: ## the local stack: API + web page, local Step Functions engine, Valkey (a valkey-server/redis-server on PATH, else embedded; data under .data), demo agents
	@echo "building clientagent… (the first build downloads modules and takes a few minutes)"
	@$(GO) build -o bin/clientagent ./cmd/clientagent
	bin/clientagent dev

test: deps lint ## every test (Go unit + embedded integration + node checks + browser tests when Chromium is installed), after make lint
	$(GO) test -count=1 -timeout 15m ./...
	cd infra && $(JSII_QUIET) $(GO) test -count=1 ./...

# The slow suite: faults that take real minutes (a 30 s store stall, an
# outage past the retry budget); build tag slow, in pkg/devstack. CI runs it beside make test.
test-slow: deps
	$(GO) test -tags slow -count=1 -timeout 20m -run 'TestSlow' ./pkg/devstack/

test-race:
	$(GO) test -race -count=1 -timeout 20m ./...

deps: npm
	$(GO) mod download
	cd infra && $(GO) mod download

# node packages for the checks that use node (asl-validator, jsonata 2.0.6,
# @a2a-js/sdk, playwright-core). Skipped, with a message, without npm.
npm:
	@if command -v npm >/dev/null 2>&1; then \
		if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then npm ci --no-audit --no-fund; fi; \
	else echo "npm not found: the node-based checks will be skipped (install Node.js 20 and npm)"; fi

# lambda.norpc: the Runtime API loop only (provided.al2023), no net/rpc.
# grpcnotrace: gRPC without golang.org/x/net/trace, whose html/template
# would keep every exported method of every type (docs/benchmarks.md).
LAMBDA_TAGS := lambda.norpc,grpcnotrace

build: ## Lambda bootstraps (arm64, provided.al2023) under bin/<function>/bootstrap, and the CLI
	@for f in $(FUNCTIONS); do \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -tags $(LAMBDA_TAGS) -o bin/$$f/bootstrap ./functions/$$f || exit 1; \
		wc -c < bin/$$f/bootstrap | awk -v f=$$f '{ printf "build %-10s %5.1f MB\n", f, $$1 / 1000000 }'; \
	done
	$(GO) build -o bin/clientagent ./cmd/clientagent

# staticcheck is a tool of the root module (go.mod's tool line, fetched by
# go mod download); infra/ runs the same binary, which go tool -n names.
lint: ## gofmt, go mod tidy -diff, go vet and staticcheck, in both modules (root and infra/)
	@files=$$(git ls-files '*.go') && out=$$(gofmt -l $$files) && test -z "$$out" || { echo "gofmt -l lists:"; echo "$$out"; exit 1; }
	$(GO) mod tidy -diff
	cd infra && $(GO) mod tidy -diff
	$(GO) vet ./...
	cd infra && $(GO) vet ./...
	$(GO) tool staticcheck ./...
	staticcheck=$$($(GO) tool -n staticcheck) && cd infra && $$staticcheck ./...

fuzz: ## every Fuzz* target of the module, each for FUZZTIME (default 20s); found with go test -list
	FUZZTIME=$${FUZZTIME:-20s} GO=$(GO) scripts/fuzz.sh

# make test runs the same scenarios in process (pkg/eval TestShippedScenariosPass).
eval: ## run the eval scenarios (testdata/evals; docs/evals.md) against a local stack with the configured model (EVAL_ARGS, e.g. --repeat 5 --json eval.json)
	$(GO) run ./cmd/clientagent eval $(EVAL_ARGS) testdata/evals

bench: ## turn benchmarks (LLM calls, state transitions, Valkey round trips per turn) and the functions' cold starts
	$(GO) test -run='^$$' -bench=. -benchmem ./pkg/devstack/
	$(GO) test -run='^$$' -bench=ColdInit -benchtime=20x ./functions/

.PHONY: bench-peers
bench-peers: ## ours against OpenAI Agents JS, LangGraph.js and bare round trips on the Popelnase turn (BENCH_KIT=the peers' kit; RUNS, TURNS1, TURNS20, POLL, CPUPROFILE; docs/benchmarks.md)
	scripts/bench-peers.sh

.PHONY: bench-ab
bench-ab: ## two builds side by side on the Popelnase turn, both stacks at once (A=binary B=binary BENCH_KIT=the peers' kit; PAIRS, TURNS, C; docs/benchmarks.md)
	scripts/bench-ab.sh $(A) $(B)

clean: ## remove the binaries and .data: every local conversation, artifact and the signing key
	rm -rf bin .data

# ---- AWS (infra/, a separate Go module: the CDK app; docs/deploy.md, infra/README.md) ----
.PHONY: synth deploy destroy test-infra smoke
ENV ?= dev
# jsii reads this before any Go code runs, so it is set here: node 20 works.
JSII_QUIET := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=18,20
# Per-environment settings are in cdk.json ("environments"). Without
# JWT_ISSUER the stack creates a Cognito user pool and uses it.
# Extra context, e.g. INFRA_CONTEXT='-c llm=openai -c webOrigins=https://chat.example.com'
INFRA_CONTEXT ?=
CDK ?= npx --yes aws-cdk@2
INFRA_ARGS = -c env=$(ENV) $(if $(JWT_ISSUER),-c jwtIssuer=$(JWT_ISSUER)) $(if $(JWT_AUDIENCE),-c jwtAudience=$(JWT_AUDIENCE)) $(INFRA_CONTEXT)

smoke: ## make smoke URL=… TOKEN=… [ORIGIN=…] or ENV=dev TOKEN=…: check a deployment end to end (default: the local stack)
	$(GO) run ./cmd/clientagent smoke $(if $(URL),-url $(URL)) $(if $(TOKEN),-token $(TOKEN)) $(if $(ORIGIN),-origin $(ORIGIN)) $(if $(filter command line,$(origin ENV)),-env $(ENV))

test-infra: ## synthesize the CDK stack and check it (no AWS account needed)
	cd infra && $(JSII_QUIET) $(GO) test -count=1 ./...

synth: build ## make synth ENV=dev|staging|prod: both stacks' templates under $$CDK_OUTDIR, else ./cdk.out (offline, no CDK CLI)
	cd infra && $(JSII_QUIET) $(GO) run . $(INFRA_ARGS)

deploy: build ## make deploy ENV=dev [JWT_ISSUER=https://… JWT_AUDIENCE=…]: both stacks, data then app (AWS credentials, a bootstrapped account; docs/deploy.md)
	$(JSII_QUIET) $(CDK) deploy $(INFRA_ARGS) --all --require-approval broadening --outputs-file cdk.out/outputs-$(ENV).json

destroy: build ## make destroy ENV=…: delete the app stack clientagent-<env>; the data stack stays (docs/deploy.md, teardown)
	$(JSII_QUIET) $(CDK) destroy $(INFRA_ARGS) clientagent-$(ENV)
