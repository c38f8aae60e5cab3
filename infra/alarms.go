package main

import (
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

// addAlarms adds the alarms: a failed or timed-out execution (a fault: a
// turn a limit ended succeeds), any function's errors or throttles, and an
// undelivered turn-ended event, to one SNS topic (subscribe to it, or set
// alarmEmail).
func (a *appStack) addAlarms() {
	p, stack, prefix := a.p, a.stack, a.prefix
	a.topic = awssns.NewTopic(stack, jsii.String("Alarms"), &awssns.TopicProps{
		TopicName:   jsii.String(prefix + "-alarms"),
		DisplayName: jsii.String("clientagent " + p.EnvName + " alarms"),
	})
	if p.AlarmEmail != "" {
		a.topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
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
	alarm := func(id, name, desc string, metric awscloudwatch.IMetric) {
		// ≥ 1 in a period: a failed execution, a function error, a message
		// in the dead-letter queue each deserve a look.
		al := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(prefix + "-" + name),
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			Threshold:          jsii.Number(1),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		al.AddAlarmAction(alarmAction)
	}
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
