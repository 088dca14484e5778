// txnetl: a transactional consume-transform-produce ETL under rebalances (issue 29, item 9;
// run by crates/laminar/tests/franz_go.rs). Everything it prints goes to stdout.
//
//	txnetl -brokers 127.0.0.1:19092 [-records 20000] [-partitions 6] [-members 3] [-timeout 4m] [-log info|debug]
//
// Produces -records values ("%06d") to an input topic, then runs -members goroutines in ONE
// consumer group (range balancer), each a kgo.GroupTransactSession loop: poll, Begin, Produce
// "out-"+value to the output topic, End(TryCommit). Each member closes its session and makes a
// new one (a new transactional id per incarnation, or the same with -stable-ids) at random
// intervals, so the group rebalances all the time; with -bail, a share of the sessions leave
// with an aborted transaction (End(TryAbort) right after a commit, as the consumers of franz-go's
// TestTxnEtl that quit do). It ends once the group's committed offsets
// cover the input, then reads the output read_committed and checks that every input value is
// there exactly once.
//
// -probe runs only the failing step, 20 times: commit, then EndTxn(abort) at once with the epoch
// the commit returned (Kafka 4.3.1: CONCURRENT_TRANSACTIONS, then ok).
//
// Exit status: 0 passed; 1 a franz-go error that is not a rebalance abort (an End error, the
// "flush unexpected err" of franz-go's own TestTxnEtl, or a produce promise error such as
// INVALID_TXN_STATE); 2 exactly-once check failed; 3 not done within -timeout; 4 setup failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	brokers    = flag.String("brokers", "127.0.0.1:19092", "seed brokers, comma separated")
	records    = flag.Int("records", 20000, "input records")
	partitions = flag.Int("partitions", 6, "partitions of the input and output topics")
	members    = flag.Int("members", 3, "group members (goroutines), each with its own session")
	timeout    = flag.Duration("timeout", 4*time.Minute, "the whole run, setup and check included")
	minLife    = flag.Duration("min-life", 500*time.Millisecond, "shortest life of a session before it is closed")
	maxLife    = flag.Duration("max-life", 5*time.Second, "longest life of a session")
	logLevel   = flag.String("log", "info", "franz-go log level of the sessions: none, error, warn, info, debug")
	prefix     = flag.String("prefix", "etl", "prefix of the topics, group and transactional ids")
	stableIDs  = flag.Bool("stable-ids", false, "reuse one transactional id per member slot (default: a new id per session)")
	txnTimeout = flag.Duration("txn-timeout", 60*time.Second, "transaction.timeout.ms of the sessions")
	pollMax    = flag.Int("poll", 50, "most records a poll returns (one transaction)")
	work       = flag.Duration("work", 50*time.Millisecond, "time a transaction spends transforming, between Produce and End")
	bail       = flag.Float64("bail", 0.5, "share of sessions that leave with an aborted transaction (End(TryAbort) right after a commit, as franz-go's TestTxnEtl consumers that quit do)")
	probe      = flag.Bool("probe", false, "instead of the ETL: commit a transaction, then at once send EndTxn(abort) with the epoch the commit returned, and print each answer")
	seed       = flag.Int64("seed", time.Now().UnixNano(), "random seed")
)

// out is every line of the program and of franz-go's loggers, one write per line.
var out = &lineWriter{w: os.Stdout}

type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func ts() string { return time.Now().Format("15:04:05.000000") }

func logf(format string, args ...any) {
	fmt.Fprintf(out, "%s ETL "+format+"\n", append([]any{ts()}, args...)...)
}

// failure is the first error that fails the run (exit 1).
var (
	failOnce sync.Once
	failMsg  atomic.Value
	done     atomic.Bool // committed offsets cover the input, or a failure: members stop
)

func fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	logf("FAIL %s", msg)
	failOnce.Do(func() { failMsg.Store(msg) })
	done.Store(true)
}

func failed() string {
	if m, ok := failMsg.Load().(string); ok {
		return m
	}
	return ""
}

var stats struct {
	sessions, commits, aborts, bails, committedRecs, produceErrs atomic.Int64
}

func level() kgo.LogLevel {
	switch *logLevel {
	case "none":
		return kgo.LogLevelNone
	case "error":
		return kgo.LogLevelError
	case "warn":
		return kgo.LogLevelWarn
	case "debug":
		return kgo.LogLevelDebug
	default:
		return kgo.LogLevelInfo
	}
}

func topicIn() string  { return *prefix + "-in" }
func topicOut() string { return *prefix + "-out" }
func group() string    { return *prefix + "-g" }

func main() {
	flag.Parse()
	logf("seed %d brokers %s records %d partitions %d members %d", *seed, *brokers, *records, *partitions, *members)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	seeds := strings.Split(*brokers, ",")

	if *probe {
		os.Exit(runProbe(ctx, seeds))
	}
	if err := setup(ctx, seeds); err != nil {
		logf("setup: %v", err)
		os.Exit(4)
	}

	var wg sync.WaitGroup
	for slot := 0; slot < *members; slot++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			member(ctx, seeds, slot, rand.New(rand.NewSource(*seed+int64(slot))))
		}()
	}
	watch(ctx, seeds)
	done.Store(true)
	wg.Wait()
	logf("sessions %d commits %d aborts(rebalance) %d aborts(leaving) %d committed-records %d produce-errors %d",
		stats.sessions.Load(), stats.commits.Load(), stats.aborts.Load(), stats.bails.Load(), stats.committedRecs.Load(), stats.produceErrs.Load())

	if m := failed(); m != "" {
		fmt.Fprintf(out, "%s RESULT FAIL: %s\n", ts(), m)
		os.Exit(1)
	}
	if ctx.Err() != nil {
		fmt.Fprintf(out, "%s RESULT FAIL: not done within %v\n", ts(), *timeout)
		os.Exit(3)
	}
	if err := verify(ctx, seeds); err != nil {
		fmt.Fprintf(out, "%s RESULT FAIL: exactly-once: %v\n", ts(), err)
		os.Exit(2)
	}
	fmt.Fprintf(out, "%s RESULT PASS\n", ts())
}

// setup creates the topics and produces the input.
func setup(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.UnknownTopicRetries(-1))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range []string{topicIn(), topicOut()} {
		resp, err := adm.CreateTopic(ctx, int32(*partitions), 1, nil, t)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", t, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", t, resp.Err)
		}
	}
	start := time.Now()
	const chunk = 1000
	for i := 0; i < *records; i += chunk {
		var rs []*kgo.Record
		for j := i; j < i+chunk && j < *records; j++ {
			v := fmt.Sprintf("%06d", j)
			rs = append(rs, &kgo.Record{Topic: topicIn(), Key: []byte(v), Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("produce input: %w", err)
		}
	}
	logf("produced %d input records in %v", *records, time.Since(start).Round(time.Millisecond))
	return nil
}

// member runs sessions one after another in one slot until done.
func member(ctx context.Context, seeds []string, slot int, rng *rand.Rand) {
	for incarnation := 0; !done.Load() && ctx.Err() == nil; incarnation++ {
		txnID := fmt.Sprintf("%s-t%d-%d", *prefix, slot, incarnation)
		if *stableIDs {
			txnID = fmt.Sprintf("%s-t%d", *prefix, slot)
		}
		life := *minLife + time.Duration(rng.Int63n(int64(*maxLife-*minLife)+1))
		session(ctx, seeds, txnID, life, rng.Float64() < *bail)
		time.Sleep(time.Duration(rng.Int63n(int64(300 * time.Millisecond))))
	}
}

// session is one group member with its own transactional id, for life. With bailOut, its last
// transaction (the first one that polls records after life is over, usually right after a
// commit) is aborted with End(TryAbort): franz-go fails the buffered records (none reached the
// broker) and, under KIP-890 part 2, sends EndTxn(abort) at once to clear server-side state.
func session(ctx context.Context, seeds []string, txnID string, life time.Duration, bailOut bool) {
	tag := txnID
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(seeds...),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(*txnTimeout),
		kgo.ConsumerGroup(group()),
		kgo.ConsumeTopics(topicIn()),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.UnknownTopicRetries(-1),
		kgo.WithLogger(kgo.BasicLogger(out, level(), func() string { return ts() + " " + tag + " " })),
	)
	if err != nil {
		fail("%s new session: %v", tag, err)
		return
	}
	stats.sessions.Add(1)
	logf("%s session start, life %v, leaves with an abort: %v", tag, life.Round(time.Millisecond), bailOut)
	defer func() {
		sess.Close()
		logf("%s session closed", tag)
	}()
	deadline := time.Now().Add(life)
	// A session that leaves with an abort polls on past its life until it gets records.
	until := deadline
	if bailOut {
		until = deadline.Add(5 * time.Second)
	}
	for !done.Load() && ctx.Err() == nil && time.Now().Before(until) {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := sess.PollRecords(pctx, *pollMax)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				logf("%s fetch error %s[%d]: %v", tag, t, p, err)
			}
		})
		if fetches.NumRecords() == 0 {
			continue
		}
		last := bailOut && time.Now().After(deadline)
		if err := sess.Begin(); err != nil {
			fail("%s Begin: %v", tag, err)
			return
		}
		var n int
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			sess.Produce(ctx, &kgo.Record{Topic: topicOut(), Key: r.Key, Value: append([]byte("out-"), r.Value...)}, func(pr *kgo.Record, err error) {
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					stats.produceErrs.Add(1)
					logf("%s produce promise error %s[%d]: %v", tag, pr.Topic, pr.Partition, err)
					if errors.Is(err, kerr.InvalidTxnState) {
						fail("%s produce: %v", tag, err)
					}
				}
			})
		})
		if last {
			// No pause: the commit just before is still being completed (its markers).
			committed, err := sess.End(ctx, kgo.TryAbort)
			if err != nil && ctx.Err() == nil {
				fail("%s flush unexpected err (End TryAbort): %v", tag, err)
			} else if committed {
				fail("%s End(TryAbort) reported a commit", tag)
			} else {
				stats.bails.Add(1)
				logf("%s left with an aborted transaction of %d records", tag, n)
			}
			return
		}
		time.Sleep(*work)
		committed, err := sess.End(ctx, kgo.TryCommit)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			fail("%s flush unexpected err: %v", tag, err)
			return
		case !committed:
			stats.aborts.Add(1)
			logf("%s End: not committed (rebalance abort) of %d records", tag, n)
		default:
			stats.commits.Add(1)
			stats.committedRecs.Add(int64(n))
		}
	}
}

// watch returns once the group's committed offsets on the input cover every record, a
// member failed, or ctx ended.
func watch(ctx context.Context, seeds []string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		fail("watch client: %v", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	last := time.Now()
	for !done.Load() && ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		offsets, err := adm.FetchOffsets(qctx, group())
		cancel()
		if err != nil {
			continue
		}
		var sum int64
		offsets.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topicIn() && o.Err == nil {
				sum += o.At
			}
		})
		if time.Since(last) > 5*time.Second {
			logf("progress: committed offsets %d of %d", sum, *records)
			last = time.Now()
		}
		if sum >= int64(*records) {
			logf("committed offsets cover the input (%d)", sum)
			return
		}
	}
}

// verify reads the output read_committed: each input value exactly once.
func verify(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ConsumeTopics(topicOut()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := make(map[string]int, *records)
	total := 0
	idle := time.Now()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			total++
			seen[string(r.Value)]++
		})
		if n > 0 {
			idle = time.Now()
			continue
		}
		if (len(seen) >= *records && time.Since(idle) > 2*time.Second) || time.Since(idle) > 10*time.Second {
			break
		}
	}
	var missing, dup []string
	for i := 0; i < *records; i++ {
		v := fmt.Sprintf("out-%06d", i)
		switch c := seen[v]; {
		case c == 0:
			missing = append(missing, v)
		case c > 1:
			dup = append(dup, fmt.Sprintf("%s x%d", v, c))
		}
		delete(seen, v)
	}
	var stray []string
	for v := range seen {
		stray = append(stray, v)
	}
	sort.Strings(stray)
	logf("verify: read %d committed output records, %d missing, %d duplicated, %d unexpected", total, len(missing), len(dup), len(stray))
	if len(missing)+len(dup)+len(stray) > 0 {
		return fmt.Errorf("%d missing (e.g. %v), %d duplicated (e.g. %v), %d unexpected", len(missing), head(missing), len(dup), head(dup), len(stray))
	}
	return nil
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// runProbe is the failing step of the ETL alone, without a group: a transaction is committed
// (EndTxn v5 answers with the next epoch while the coordinator is still writing the commit's
// markers), then EndTxn(abort) of an empty transaction is sent at once with that epoch, as
// franz-go does for a transaction whose records were all aborted before being sent. Kafka
// 4.3.1 answers CONCURRENT_TRANSACTIONS until the commit is complete, then aborts; any other
// error is a failure (exit 1).
func runProbe(ctx context.Context, seeds []string) int {
	if err := setup(ctx, seeds); err != nil {
		logf("setup: %v", err)
		return 4
	}
	bad := 0
	for round := 0; round < 20; round++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(fmt.Sprintf("%s-probe-%d", *prefix, round)))
		if err != nil {
			logf("client: %v", err)
			return 4
		}
		// The first transaction of a client learns the broker's transaction.version; the
		// second uses version 2 (Produce v12, EndTxn v5).
		for i := 0; i < 2; i++ {
			if err := cl.BeginTransaction(); err != nil {
				logf("begin: %v", err)
				return 4
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topicOut(), Value: []byte("probe")}).FirstErr(); err != nil {
				logf("produce: %v", err)
				return 4
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				logf("commit: %v", err)
				return 4
			}
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			logf("producer id: %v", err)
			return 4
		}
		var answers []string
		for try := 0; try < 50; try++ {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID = fmt.Sprintf("%s-probe-%d", *prefix, round)
			req.ProducerID, req.ProducerEpoch, req.Commit = pid, epoch, false
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				logf("EndTxn: %v", err)
				return 4
			}
			e := kerr.ErrorForCode(resp.ErrorCode)
			if e == nil {
				answers = append(answers, fmt.Sprintf("v%d ok (epoch %d -> %d)", resp.Version, epoch, resp.ProducerEpoch))
				break
			}
			answers = append(answers, fmt.Sprintf("v%d %v", resp.Version, kerr.TypedErrorForCode(resp.ErrorCode).Message))
			if !errors.Is(e, kerr.ConcurrentTransactions) {
				bad++
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		logf("probe %d: commit answered epoch %d; EndTxn(abort, pid %d, epoch %d) answers: %s", round, epoch, pid, epoch, strings.Join(answers, ", "))
		cl.Close()
	}
	if bad > 0 {
		fmt.Fprintf(out, "%s RESULT FAIL: %d of 20 probes got an error other than CONCURRENT_TRANSACTIONS\n", ts(), bad)
		return 1
	}
	fmt.Fprintf(out, "%s RESULT PASS\n", ts())
	return 0
}
