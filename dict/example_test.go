package dict_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// A PSP's own DICT client, throttled by balde: dict.Transport wraps its
// transport. The lookup holds the worst case (20 tokens from the payer)
// until the answer refunds the difference; a refusal is an error that
// carries the mirror's Decision (nothing is sent): throttle.AsRefusal, or
// errors.As a *throttle.RefusedError, reads it.
func ExampleTransport() {
	ctx := context.Background()
	sim, _ := dictsim.NewServer(ctx, dictsim.Config{EntriesFile: "testdata/entries.csv"})
	dictURL := httptest.NewServer(sim)
	defer dictURL.Close()

	clock := throttle.NewManualClock(throttletest.Epoch)
	store := throttletest.NewMemStore(clock.Now) // sqlstore.Open in production
	catalog := dict.NewCatalog("prod")           // category H until learned
	lim, _ := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
	client := &http.Client{Transport: &dict.Transport{
		Base:        http.DefaultTransport, // the PSP's transport, with its mutual TLS
		Meter:       dict.Meter{Limiter: lim, Catalog: catalog},
		Participant: "12345678",
	}}

	lookup := func(key, e2e string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, dictURL.URL+"/api/v2/entries/"+key, nil)
		req.Header.Set(dict.HeaderPayerID, "11144477735")
		req.Header.Set(dict.HeaderEndToEndID, e2e)
		resp, err := client.Do(req)
		if d, refused := throttle.AsRefusal(err); refused {
			fmt.Println("refused locally:", d.Key.Policy, d.Reason, "retry after", d.RetryAfter)
			return
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		st, _ := lim.State(ctx, catalog.Key(dict.PolicyEntriesReadUserAntiscan, "11144477735"))
		fmt.Println(resp.StatusCode, "payer tokens:", st.Tokens)
	}
	lookup("maria.souza@example.com", "E12345678202601010000a0000000001")
	for i := range 6 {
		lookup(fmt.Sprintf("nobody%d@example.com", i), fmt.Sprintf("E12345678202601010000a000000001%d", i))
	}
	// Output:
	// 200 payer tokens: 99
	// 404 payer tokens: 79
	// 404 payer tokens: 59
	// 404 payer tokens: 39
	// 404 payer tokens: 19
	// 404 payer tokens: -1
	// refused locally: ENTRIES_READ_USER_ANTISCAN empty retry after 1m0s
}
