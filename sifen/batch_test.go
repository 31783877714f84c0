package sifen_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// queuedCDCs counts, per CDC, the lots the simulator queued (0300): a DE
// sent exactly once counts 1.
type queuedCDCs struct {
	mu sync.Mutex
	n  map[string]int
}

func (q *queuedCDCs) hook(_ context.Context, r sifensim.Recepcion) {
	if r.Code != sifensim.CodeLotQueued {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == nil {
		q.n = make(map[string]int)
	}
	for _, c := range r.CDCs {
		q.n[c]++
	}
}

func (q *queuedCDCs) counts() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.n))
	for k, v := range q.n {
		out[k] = v
	}
	return out
}

// sleepOn is a batch's Sleep on the world's fake clock: it moves the clock
// and records the wait.
func (w *world) sleepOn(slept *[]time.Duration) func(context.Context, time.Duration) error {
	var mu sync.Mutex
	return func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		mu.Lock()
		*slept = append(*slept, d)
		mu.Unlock()
		w.clock.Advance(d)
		return nil
	}
}

func (w *world) documents(t *testing.T, ids []int64) []sifen.Document {
	t.Helper()
	docs := make([]sifen.Document, len(ids))
	for i, id := range ids {
		docs[i] = w.doc(t, id)
	}
	return docs
}

func byDocument(results []sifen.DocResult) map[int64]sifen.DocResult {
	m := make(map[int64]sifen.DocResult, len(results))
	for _, r := range results {
		m[r.DocumentID] = r
	}
	return m
}

// Issue 22, item 3: RUCs are independent gates. RUC A is blocked for 10
// minutes by the simulator (its first lot arrives within the interval of a
// lot another client sent: 0301), RUC B's two lots go out on time — the
// first at once, the second after B's own 10 s — and A's documents are
// sent after the block in the same batch, as two halves (never the lot
// that drew 0301 again), then A's next lot. Each document's wait is its
// own.
func TestSendDocumentsRUCsAreIndependentGates(t *testing.T) {
	var q queuedCDCs
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{AfterRecepcion: q.hook}})
	ctx := context.Background()

	// Another client of RUC A (not through balde) sends a lot just before.
	other, err := sifen.ParseLote(sifentest.Lote(sifentest.Docs("80069563", 500, 1)...))
	require.NoError(t, err)
	packed, err := other.Pack()
	require.NoError(t, err)
	c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: w.simURL + "/{env}", Timeout: 30 * time.Second})
	require.NoError(t, err)
	resp, err := c.RecepcionLote(ctx, sifen.EnvTest, packed.Zip)
	require.NoError(t, err)
	require.Equal(t, sifen.CodeLotQueued, resp.Code)

	a := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 60)...))
	b := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("88888801", 1, 60)...))
	start := w.clock.Now()
	var slept []time.Duration
	var sentAt []time.Duration // when each lot of B left, since the start
	results, err := sifen.SendDocuments(ctx, w.sender, w.documents(t, append(append([]int64{}, a...), b...)), sifen.BatchConfig{
		Wait: true, MaxWait: 15 * time.Minute, Clock: w.clock.Now, Sleep: w.sleepOn(&slept),
		Progress: func(e sifen.Event) {
			if e.Kind == sifen.EventLotSent && e.LotSend.RUC.Number == "88888801" {
				sentAt = append(sentAt, w.clock.Now().Sub(start))
			}
		},
	})
	require.NoError(t, err)
	require.Len(t, results, 120)
	res := byDocument(results)

	require.Equal(t, []time.Duration{0, 10 * time.Second}, sentAt, "B's lots go out on time, not behind A's block")
	for i, id := range b {
		r := res[id]
		require.Equal(t, sifen.BatchSent, r.Result, r.Message)
		want := time.Duration(0)
		if i >= 50 {
			want = 10 * time.Second
		}
		require.Equal(t, want, r.Wait, "B's document %d", i+1)
	}
	for i, id := range a {
		r := res[id]
		require.Equal(t, sifen.BatchSent, r.Result, "A's document %d: %s", i+1, r.Message)
		want := 10 * time.Minute // from the start: the block after the 0301
		switch {
		case i >= 50:
			want = 10 * time.Second // A's next lot: its own interval after the second half
		case i >= 25:
			want = 10*time.Minute + 10*time.Second
		}
		require.Equal(t, want, r.Wait, "A's document %d", i+1)
		require.Equal(t, sifen.StatusSent, w.doc(t, id).Status)
	}
	require.Equal(t, []time.Duration{10 * time.Second, 10*time.Minute - 10*time.Second, 10 * time.Second, 10 * time.Second}, slept)

	st := w.stats(t)
	require.Equal(t, int64(1), st.Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotNotQueued), "the one 0301 the other client caused")
	for cdc, n := range q.counts() {
		require.Equal(t, 1, n, "CDC %s queued %d times", cdc, n)
	}
	require.Len(t, q.counts(), 121)
}

// Without waiting (the web's "Send all drafts"), one pass: each RUC's first
// lot goes, every lot its gate refuses is reported blocked with the wait,
// and the documents stay drafts.
func TestSendDocumentsOnePass(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	ctx := context.Background()
	a := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 60)...))
	b := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("88888801", 1, 3)...))
	results, err := sifen.SendDocuments(ctx, w.sender, w.documents(t, append(append([]int64{}, a...), b...)), sifen.BatchConfig{Clock: w.clock.Now,
		Sleep: func(context.Context, time.Duration) error { t.Fatal("one pass never sleeps"); return nil }})
	require.NoError(t, err)
	res := byDocument(results)
	require.Len(t, res, 63)
	for i, id := range a {
		r := res[id]
		if i < 50 {
			require.Equal(t, sifen.BatchSent, r.Result)
			continue
		}
		require.Equal(t, sifen.BatchBlocked, r.Result)
		require.Equal(t, 10*time.Second, r.Wait)
		require.Contains(t, r.Message, "blocked: cooldown on SIFEN_RECEPCION_LOTE/test/80069563")
		require.Equal(t, sifen.StatusDraft, w.doc(t, id).Status)
	}
	for _, id := range b {
		require.Equal(t, sifen.BatchSent, res[id].Result)
	}
}

// Issue 22, item 1: a batch whose lot loses the claim to another process
// that sent part of it reads the lot again: the documents the other process
// sent are "sent elsewhere", the others are sent by this batch; none is
// left a draft. Before, all 50 were reported sent by another process and
// 25 stayed drafts.
func TestSendDocumentsClaimRaceSendsTheRest(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		var q queuedCDCs
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{AfterRecepcion: q.hook}})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 50)...))
		// The other process: its own store connection and Sender.
		store := sqlstoretest.MustOpenDSN(t, w.dsn, w.clock.Now)
		_, otherSender := newSender(t, store, store, w.simURL, sifen.PolicyConfig{}, w.clock.Now, sifen.SenderConfig{})

		docs := w.documents(t, ids) // read as drafts
		racer := &raceFirst{LotSender: w.sender, before: func() {
			out, err := otherSender.Send(ctx, ids[25:]...)
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeSent, out.Status)
		}}
		var slept []time.Duration
		results, err := sifen.SendDocuments(ctx, racer, docs, sifen.BatchConfig{Wait: true, Clock: w.clock.Now, Sleep: w.sleepOn(&slept)})
		require.NoError(t, err)
		res := byDocument(results)
		require.Len(t, res, 50)
		for i, id := range ids {
			r := res[id]
			if i < 25 {
				require.Equal(t, sifen.BatchSent, r.Result, "document %d: %s", i+1, r.Message)
				require.Equal(t, 10*time.Second, r.Wait, "after the other process's lot, the RUC's interval")
				continue
			}
			require.Equal(t, sifen.BatchSentElsewhere, r.Result, "document %d", i+1)
			require.Equal(t, sifen.StatusSent, r.Document.Status)
			require.Contains(t, r.Message, "sent by another process")
		}
		for _, id := range ids {
			require.Equal(t, sifen.StatusSent, w.doc(t, id).Status)
		}
		require.Len(t, q.counts(), 50)
		for cdc, n := range q.counts() {
			require.Equal(t, 1, n, "CDC %s", cdc)
		}
		require.Equal(t, int64(0), w.stats(t).Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotNotQueued))
	})
}

// raceFirst runs before just before its first Send: another process wins
// the claim between the batch's read and its send.
type raceFirst struct {
	sifen.LotSender
	before func()
	once   sync.Once
}

func (r *raceFirst) Send(ctx context.Context, ids ...int64) (sifen.LotSend, error) {
	r.once.Do(r.before)
	return r.LotSender.Send(ctx, ids...)
}

// Issue 22, done when: two batches started together on one database over
// the same documents of three RUCs (as two sifen-send processes, each with
// its own connection and Sender) send every DE exactly once, with no 0301
// from a simulator that enforces the interval, and leave no draft; a
// document is "sent elsewhere" in one batch only if the other sent it.
func TestSendDocumentsTwoBatchesOverlapping(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		var q queuedCDCs
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{AfterRecepcion: q.hook}})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var ids []int64
		for _, ruc := range []string{"80069563", "88888801", "800695"} {
			ids = append(ids, w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs(ruc, 1, 45)...))...)
		}
		senders := []sifen.LotSender{w.sender}
		store := sqlstoretest.MustOpenDSN(t, w.dsn, w.clock.Now)
		_, second := newSender(t, store, store, w.simURL, sifen.PolicyConfig{}, w.clock.Now, sifen.SenderConfig{})
		senders = append(senders, second)

		sets := [][]int64{ids[:100], ids[35:]} // overlapping: 35 to 99 in both
		results := make([][]sifen.DocResult, len(senders))
		errs := make([]error, len(senders))
		var wg sync.WaitGroup
		for i, s := range senders {
			docs := w.documents(t, sets[i])
			var slept []time.Duration
			wg.Go(func() {
				results[i], errs[i] = sifen.SendDocuments(ctx, s, docs, sifen.BatchConfig{Wait: true, Clock: w.clock.Now, Sleep: w.sleepOn(&slept)})
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("the two batches did not end within 2 minutes")
		}
		sentBy := map[int64]int{}
		for i := range senders {
			require.NoError(t, errs[i])
			for _, r := range results[i] {
				if r.Result == sifen.BatchSent {
					sentBy[r.DocumentID]++
				}
			}
		}
		for i := range senders {
			elsewhere := 0
			for _, r := range results[i] {
				switch r.Result {
				case sifen.BatchSent:
				case sifen.BatchSentElsewhere:
					elsewhere++
					require.Equal(t, 1, sentBy[r.DocumentID], "document %d is sent elsewhere only if the other batch sent it", r.DocumentID)
				default:
					t.Fatalf("batch %d: document %d %s: %s", i, r.DocumentID, r.Result, r.Message)
				}
			}
			t.Logf("batch %d: %d of %d documents sent by the other batch", i, elsewhere, len(results[i]))
		}
		for _, id := range ids {
			require.Equal(t, 1, sentBy[id], "document %d sent once", id)
			require.Equal(t, sifen.StatusSent, w.doc(t, id).Status)
		}
		require.Len(t, q.counts(), len(ids))
		for cdc, n := range q.counts() {
			require.Equal(t, 1, n, "CDC %s", cdc)
		}
		require.Equal(t, int64(0), w.stats(t).Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotNotQueued))
	})
}

// FollowDocuments fetches the results of the documents sent, each lot
// queried as SIFEN_CONSULTA_LOTE admits (the first time 10 minutes after
// its send), and tells each document's result once.
func TestFollowDocuments(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{Processing: time.Minute}})
	ctx := context.Background()
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 3)...))
	out, err := w.sender.Send(ctx, ids...)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)

	var slept []time.Duration
	var got []int64
	left, err := sifen.FollowDocuments(ctx, w.sender, nil, sifen.BatchConfig{Sleep: w.sleepOn(&slept),
		Progress: func(e sifen.Event) {
			if e.Kind == sifen.EventResult {
				require.Equal(t, sifen.StatusApproved, e.Document.Status)
				got = append(got, e.Document.ID)
			}
		}})
	require.NoError(t, err)
	require.Empty(t, left)
	require.Equal(t, ids, got, "each document once, found from the database's sent lots")
	require.Equal(t, []time.Duration{sifen.DefaultConsultaInterval}, slept)
}

// A lot whose documents another send holds (in sending, its lot at SIFEN
// without an answer yet) is not reported at once: the batch watches them,
// and says "sent elsewhere" once that send recorded SIFEN's 0300, while
// the documents nobody took are sent by the batch.
func TestSendDocumentsWatchesDocumentsAnotherSendHolds(t *testing.T) {
	var q queuedCDCs
	release := make(chan struct{})
	arrived := make(chan struct{})
	var first atomic.Bool
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{AfterRecepcion: func(ctx context.Context, r sifensim.Recepcion) {
		q.hook(ctx, r)
		if first.CompareAndSwap(false, true) {
			close(arrived)
			select { // the other send's answer is held until the batch watches
			case <-release:
			case <-time.After(10 * time.Second):
				t.Error("the batch did not start watching within 10 s")
			}
		}
	}}})
	ctx := context.Background()
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 50)...))
	store := sqlstoretest.MustOpenDSN(t, w.dsn, w.clock.Now)
	_, otherSender := newSender(t, store, store, w.simURL, sifen.PolicyConfig{}, w.clock.Now, sifen.SenderConfig{})
	otherDone := make(chan error, 1)
	docs := w.documents(t, ids)
	racer := &raceFirst{LotSender: w.sender, before: func() {
		go func() {
			_, err := otherSender.Send(ctx, ids[25:]...)
			otherDone <- err
		}()
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Error("the other send did not reach the simulator within 10 s")
		}
	}}
	var slept []time.Duration
	sleep := w.sleepOn(&slept)
	var once sync.Once
	results, err := sifen.SendDocuments(ctx, racer, docs, sifen.BatchConfig{Wait: true, Clock: w.clock.Now,
		Sleep: func(ctx context.Context, d time.Duration) error {
			once.Do(func() {
				close(release)
				select {
				case err := <-otherDone:
					require.NoError(t, err)
				case <-time.After(10 * time.Second):
					t.Error("the other send did not end within 10 s")
				}
			})
			return sleep(ctx, d)
		}})
	require.NoError(t, err)
	require.Equal(t, time.Second, slept[0], "the first wait is the watch of the held documents")
	res := byDocument(results)
	require.Len(t, res, 50)
	for i, id := range ids {
		want := sifen.BatchSent
		if i >= 25 {
			want = sifen.BatchSentElsewhere
		}
		require.Equal(t, want, res[id].Result, "document %d: %s", i+1, res[id].Message)
		require.Equal(t, sifen.StatusSent, w.doc(t, id).Status)
	}
	for cdc, n := range q.counts() {
		require.Equal(t, 1, n, "CDC %s", cdc)
	}
	require.Len(t, q.counts(), 50)
}

// A document another send claimed between its import and the batch (it is
// handed over in sending, or already sent) still gets a result: before,
// GroupLots left it out and the batch said nothing of it (sifen-send printed
// one line fewer than its DEs, seen under load).
func TestSendDocumentsReportsDocumentsClaimedBeforeIt(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	ctx := context.Background()
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 3)...))
	docs := w.documents(t, ids)
	// Another send took the first two: the batch is given them as sent.
	out, err := w.sender.Send(ctx, ids[:2]...)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)
	given := w.documents(t, ids[:2])
	given = append(given, docs[2])
	var slept []time.Duration
	results, err := sifen.SendDocuments(ctx, w.sender, given, sifen.BatchConfig{Wait: true, Clock: w.clock.Now, Sleep: w.sleepOn(&slept)})
	require.NoError(t, err)
	res := byDocument(results)
	require.Len(t, res, 3, "one result per document given")
	for _, id := range ids[:2] {
		require.Equal(t, sifen.BatchSentElsewhere, res[id].Result)
	}
	require.Equal(t, sifen.BatchSent, res[ids[2]].Result)
}
