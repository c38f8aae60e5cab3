package main

import (
	"fmt"
	"math"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"
)

// Thresholds of the alarms that watch a limit rather than count faults.
const (
	// CapAlarmFraction: the cache's storage and ECPU alarms fire at 75% of
	// the caps the stack sets, while there is still room to raise them.
	CapAlarmFraction = 0.75
	// AccountConcurrencyFraction: the account concurrency alarm fires at
	// 80% of the account's quota, before the steps are throttled.
	AccountConcurrencyFraction = 0.8
	// API5xxThreshold is how many 5xx answers in 5 minutes page someone:
	// a single 503 (the store briefly unavailable, Retry-After) is not a
	// fault, a run of them is.
	API5xxThreshold = 5
)

// bytesPerGB is how the storage alarm counts the cache's GB: 10^9 bytes,
// so that it fires early rather than late should ElastiCache count 2^30.
const bytesPerGB = 1e9

// addAlarms adds the alarms, all to one SNS topic: a failed, timed-out or
// throttled execution (a fault: a turn a limit ended succeeds), any
// function's errors or throttles, an undelivered turn-ended event, the
// API's 5xx answers, the account's Lambda concurrency, and the cache
// nearing its storage and ECPU caps. The topic is the stack's own (with
// alarmEmail subscribed), or the existing alarmTopicArn.
func (a *appStack) addAlarms() {
	p, stack, prefix := a.p, a.stack, a.prefix
	if p.AlarmTopicArn != "" {
		a.topic = awssns.Topic_FromTopicArn(stack, jsii.String("Alarms"), jsii.String(p.AlarmTopicArn))
	} else {
		// Publishers must use TLS (a deny on aws:SecureTransport false).
		topic := awssns.NewTopic(stack, jsii.String("Alarms"), &awssns.TopicProps{
			TopicName:   jsii.String(prefix + "-alarms"),
			DisplayName: jsii.String("clientagent " + p.EnvName + " alarms"),
			EnforceSSL:  jsii.Bool(true),
		})
		if p.AlarmEmail != "" {
			topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
		}
		a.topic = topic
	}
	alarmAction := awscloudwatchactions.NewSnsAction(a.topic)
	// A long workflow continues in a new invoke invocation by returning
	// WorkflowContinuesError (pkg/turn), which Lambda counts as an error;
	// the invoke step logs each one ("status":"continues"), and invoke's
	// errors alarm subtracts them, so only real failures page anyone.
	a.continuations = awslogs.NewMetricFilter(stack, jsii.String("InvokeContinuations"), &awslogs.MetricFilterProps{
		LogGroup:        a.fns[FnInvoke].LogGroup(),
		FilterPattern:   awslogs.FilterPattern_StringValue(jsii.String("$.status"), jsii.String("="), jsii.String("continues")),
		MetricNamespace: jsii.String(a.namespace()),
		MetricName:      jsii.String("WorkflowContinuations"),
		MetricValue:     jsii.String("1"),
		DefaultValue:    jsii.Number(0),
	})
	alarmAt := func(id, name, desc string, metric awscloudwatch.IMetric, threshold float64, periods float64) {
		al := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(prefix + "-" + name),
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		al.AddAlarmAction(alarmAction)
	}
	// ≥ 1 in a period: a failed execution, a function error, a message in
	// the dead-letter queue each deserve a look.
	alarm := func(id, name, desc string, metric awscloudwatch.IMetric) { alarmAt(id, name, desc, metric, 1, 1) }
	fiveMinutes := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	alarm("AlarmTurnsFailed", "turns-failed", "a turn's execution failed: a fault (a step's error, FailTurn), not a limit", a.sm.MetricFailed(fiveMinutes))
	alarm("AlarmTurnsTimedOut", "turns-timed-out", "a turn's execution timed out", a.sm.MetricTimedOut(fiveMinutes))
	// A full Valkey refuses writes (reads keep working): pkg/metrics counts
	// each refusal from the functions' logs (Embedded Metric Format).
	alarm("AlarmStoreFull", "store-full", "Valkey refused a write for lack of memory (maxmemory): raise the cache's limit", awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(a.namespace()), MetricName: jsii.String("StoreFull"),
		Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum"),
	}))
	a.alarmed = slices.Clone(platformFunctions)
	if a.demo != nil {
		a.alarmed = append(a.alarmed, functionSpec{name: FnDemoAgents})
		a.fns[FnDemoAgents] = a.demo
	}
	for _, spec := range a.alarmed {
		fn, id := a.fns[spec.name], functionID(spec.name)
		var errs awscloudwatch.IMetric = fn.MetricErrors(fiveMinutes)
		if spec.name == FnInvoke {
			errs = awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("errors - continuations"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"errors":        errs,
					"continuations": a.continuations.Metric(fiveMinutes),
				},
				Label:  jsii.String("invoke errors that are not workflow continuations"),
				Period: awscdk.Duration_Minutes(jsii.Number(5)),
			})
		}
		alarm("Alarm"+id+"Errors", spec.name+"-errors", spec.name+" returned errors", errs)
		alarm("Alarm"+id+"Throttles", spec.name+"-throttles", spec.name+" was throttled", fn.MetricThrottles(fiveMinutes))
	}
	alarm("AlarmTurnEndedDLQ", "turn-ended-dlq", "a turn-ended event was not handled: its turn may still read as running (messages in the dead-letter queue)",
		a.turnEndedDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum"),
		}))
	a.addLimitAlarms(alarm, alarmAt)
}

// addLimitAlarms adds the alarms of limits: executions the account
// throttled, the API's 5xx answers, the account's Lambda concurrency, and
// the cache nearing its storage and ECPU caps (ElastiCache Serverless
// evicts at the storage cap and throttles at the ECPU cap; docs/deploy.md,
// "When the cache is full").
func (a *appStack) addLimitAlarms(alarm func(id, name, desc string, metric awscloudwatch.IMetric),
	alarmAt func(id, name, desc string, metric awscloudwatch.IMetric, threshold, periods float64)) {
	p := a.p
	fiveMinutes := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	alarm("AlarmTurnsThrottled", "turns-throttled", "Step Functions throttled a turn's execution (StartExecution or state transitions over the account's quota)",
		a.sm.MetricThrottled(fiveMinutes))
	alarmAt("AlarmApi5xx", "api-5xx", fmt.Sprintf("the HTTP API answered 5xx at least %d times in 5 minutes", API5xxThreshold),
		a.httpAPI.MetricServerError(fiveMinutes), API5xxThreshold, 1)
	// Claimed concurrency counts what every function of the account holds,
	// reserved or not: near the quota, new invocations are throttled.
	concurrency := math.Floor(AccountConcurrencyFraction * float64(p.LambdaAccountConcurrency))
	alarmAt("AlarmAccountConcurrency", "account-concurrency",
		fmt.Sprintf("the account's Lambda concurrency reached %.0f of its %d (every function in the region shares it)", concurrency, p.LambdaAccountConcurrency),
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/Lambda"), MetricName: jsii.String("ClaimedAccountConcurrency"),
			Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Maximum"),
		}), concurrency, 3)
	cacheMetric := func(name, stat string, minutes float64) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/ElastiCache"), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{"clusterId": a.d.cache.Ref()},
			Period:        awscdk.Duration_Minutes(jsii.Number(minutes)), Statistic: jsii.String(stat),
		})
	}
	storage := math.Floor(CapAlarmFraction * float64(p.ValkeyMaxStorageGB) * bytesPerGB)
	alarmAt("AlarmStoreStorage", "store-storage",
		fmt.Sprintf("Valkey holds %.0f%% of its %d GB cap: at the cap it evicts idle conversations and ended turns; raise valkeyMaxStorageGb", 100*CapAlarmFraction, p.ValkeyMaxStorageGB),
		cacheMetric("BytesUsedForCache", "Maximum", 5), storage, 1)
	// ElastiCacheProcessingUnits is a count per period: per second, it is
	// the sum over a minute divided by 60.
	ecpu := CapAlarmFraction * float64(p.ValkeyMaxECPUPerSecond)
	alarmAt("AlarmStoreECPU", "store-ecpu",
		fmt.Sprintf("Valkey used %.0f%% of its %d ECPU/s cap for 5 minutes: at the cap it throttles; raise valkeyMaxEcpuPerSecond", 100*CapAlarmFraction, p.ValkeyMaxECPUPerSecond),
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression:   jsii.String("ecpu / 60"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"ecpu": cacheMetric("ElastiCacheProcessingUnits", "Sum", 1)},
			Label:        jsii.String("Valkey ECPU per second"),
			Period:       awscdk.Duration_Minutes(jsii.Number(1)),
		}), ecpu, 5)
}

// newDashboard is the operators' view of one environment: turns (started,
// succeeded, failed, their duration), every function's duration, errors
// and throttles, the workflow continuations, and the cache's load.
func newDashboard(stack awscdk.Stack, prefix, namespace string, sm awsstepfunctions.StateMachine, fns map[string]awslambda.Function, specs []functionSpec,
	continuations awslogs.MetricFilter, cacheName *string) {
	period := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	p99 := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("p99")}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	var durations, errs, throttles []awscloudwatch.IMetric
	for _, spec := range specs {
		fn := fns[spec.name]
		label := &awscloudwatch.MetricOptions{Label: jsii.String(spec.name)}
		durations = append(durations, fn.MetricDuration(p99).With(label))
		errs = append(errs, fn.MetricErrors(period).With(label))
		throttles = append(throttles, fn.MetricThrottles(period).With(label))
	}
	cacheMetric := func(name, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String("AWS/ElastiCache"),
			MetricName:    jsii.String(name),
			DimensionsMap: &map[string]*string{"clusterId": cacheName},
			Statistic:     jsii.String(stat),
			Period:        awscdk.Duration_Minutes(jsii.Number(5)),
		})
	}
	// The per-turn metrics the functions log as EMF when a turn ends
	// (pkg/metrics, pkg/turn): totals, and turns by status.
	turnMetric := func(name, stat string, dims map[string]*string, label string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(namespace), MetricName: jsii.String(name), DimensionsMap: &dims,
			Statistic: jsii.String(stat), Period: awscdk.Duration_Minutes(jsii.Number(5)), Label: jsii.String(label),
		})
	}
	var byStatus []awscloudwatch.IMetric
	for _, status := range TurnStatuses {
		byStatus = append(byStatus, turnMetric("TurnEnded", "Sum", map[string]*string{"Status": jsii.String(status)}, status))
	}
	awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(prefix),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Turns", sm.MetricStarted(period), sm.MetricSucceeded(period), sm.MetricFailed(period), sm.MetricTimedOut(period)),
				graph("Turn duration (p99, ms)", sm.MetricTime(p99)),
			},
			{
				graph("Function duration (p99, ms)", durations...),
				graph("Function errors", errs...),
			},
			{
				graph("Function throttles", throttles...),
				graph("Workflow continuations", continuations.Metric(period)),
			},
			{
				graph("Valkey processing units (ECPU)", cacheMetric("ElastiCacheProcessingUnits", "Sum")),
				graph("Valkey data (bytes)", cacheMetric("BytesUsedForCache", "Maximum")),
			},
			{
				graph("Turns ended, by status", byStatus...),
				graph("Model cost (USD)", turnMetric("TurnCostUSD", "Sum", nil, "total"), turnMetric("TurnCostUSD", "p99", nil, "p99 per turn")),
			},
			{
				graph("Tokens per turn", turnMetric("TurnTokens", "Average", nil, "average"), turnMetric("TurnTokens", "p99", nil, "p99"),
					turnMetric("TurnCachedTokens", "Average", nil, "cached (average)")),
				graph("LLM calls and steps per turn", turnMetric("TurnLLMCalls", "Average", nil, "LLM calls (average)"), turnMetric("TurnLLMCalls", "Maximum", nil, "LLM calls (max)"),
					turnMetric("TurnSteps", "Average", nil, "steps (average)")),
			},
			{
				graph("Turn duration from the turns' own figures (ms)", turnMetric("TurnDuration", "p50", nil, "p50"), turnMetric("TurnDuration", "p99", nil, "p99"),
					turnMetric("TurnUserWait", "p99", nil, "waiting for the user (p99)")),
			},
		},
	})
}
