// Run by crates/laminar/tests/franz_go.rs:
//
//	txnchain BOOTSTRAP TOTAL
//
// Two transactional stages chained with franz-go's GroupTransactSession, each a
// consume-transform-produce loop that commits its input offsets in its transaction:
// stage 1 reads chain-in and writes "s1-"+value to chain-mid; stage 2 reads chain-mid
// (read_committed) and writes "s2-"+value to chain-out. Ends (exit 0) once both groups have
// committed offsets covering TOTAL records; a failed transaction is aborted and its
// records consumed again from the committed offsets, as the session does.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func stage(ctx context.Context, bootstrap, group, in, out, prefix, txnID string, total int64, wg *sync.WaitGroup) {
	defer wg.Done()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(bootstrap),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.RecordRetries(1<<20),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel(), func() string { return group + " " })),
	)
	if err != nil {
		fmt.Println(group, "session:", err)
		os.Exit(1)
	}
	defer sess.Close()
	adm := kadm.NewClient(sess.Client())
	for ctx.Err() == nil {
		// A poll waits until records come or its context ends: end it soon, to look at the
		// committed offsets when there is nothing left to read.
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := sess.PollRecords(pctx, 50)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fmt.Println(group, "fetch", t, p, err)
			}
		})
		if fetches.NumRecords() == 0 {
			if committed(ctx, adm, group, in) >= total {
				fmt.Println(group, "done")
				return
			}
			continue
		}
		if err := sess.Begin(); err != nil {
			fmt.Println(group, "begin:", err)
			os.Exit(1)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: append([]byte(prefix), r.Value...)}, func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Println(group, "produce:", err)
				}
			})
		})
		ok, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			fmt.Println(group, "end (aborted, consumed again):", err)
		} else if !ok {
			fmt.Println(group, "end: not committed (a rebalance), consumed again")
		}
	}
}

// committed is the sum of group's committed offsets on topic's partitions: the records done.
func committed(ctx context.Context, adm *kadm.Client, group, topic string) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	var sum int64
	for _, ps := range offsets {
		for _, o := range ps {
			if o.Topic == topic && o.Err == nil {
				sum += o.At
			}
		}
	}
	return sum
}

// logLevel is info with TXNCHAIN_DEBUG set, else warnings only.
func logLevel() kgo.LogLevel {
	if os.Getenv("TXNCHAIN_DEBUG") != "" {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func main() {
	bootstrap := os.Args[1]
	total, err := strconv.ParseInt(os.Args[2], 10, 64)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go stage(ctx, bootstrap, "chain-g1", "chain-in", "chain-mid", "s1-", "chain-t1", total, &wg)
	go stage(ctx, bootstrap, "chain-g2", "chain-mid", "chain-out", "s2-", "chain-t2", total, &wg)
	wg.Wait()
	if ctx.Err() != nil {
		fmt.Println("not done in time")
		os.Exit(1)
	}
}
