package balde_test

import (
	"context"
	"log"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// The README's first example, compiled here: its Go block is the body of
// this function between the README markers (TestReadmeExampleIsCompiled).
// It has no Output line, so go test compiles it and does not run it.
func Example_readme() {
	// README:begin
	ctx := context.Background()
	sms := throttle.PerMinute("SMS_PROVIDER", 2, 2) // the app's own limit: 2 a minute, 2 at once
	eng, err := balde.Open(ctx, balde.Config{
		DB:        "sqlite://balde.db", // or "postgres://…" with the pgxdriver import
		Migrate:   true,
		Resolvers: throttle.Resolvers{throttle.Policies{sms.Name: sms}},
		Inbound:   &web.InboundConfig{IPLimit: 120}, // 120 requests a minute per client IP
	})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	go eng.Run(ctx) // the background jobs: SIFEN lot polling, DICT reconciliation, prune…

	mux := http.NewServeMux()
	mux.HandleFunc("POST /sms", func(w http.ResponseWriter, r *http.Request) {
		key := throttle.Key{Policy: sms.Name, Env: "prod", Identifier: r.FormValue("phone")}
		d, err := eng.Limiter().Take(r.Context(), "", throttle.Charge{Key: key, Cost: 1})
		if err != nil { // a failure of the store, not a refusal
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		if !d.Allowed { // a refusal is a value: why, and the exact wait
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.RetryAfter.Seconds()))))
			http.Error(w, "not sent: "+string(d.Reason), http.StatusTooManyRequests)
			return
		}
		// … send the SMS: the token is taken
	})

	admin := eng.NewServer(os.Getenv("BALDE_DICT_PARTICIPANT")) // admin pages, DICT lookups, SIFEN documents
	admin.BasePath = "/balde"
	admin.Admin = web.Credentials{User: "ops", Password: os.Getenv("BALDE_ADMIN_PASSWORD")}
	h, err := admin.Handler()
	if err != nil {
		log.Fatal(err)
	}
	mux.Handle("/balde/", h)
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", eng.Inbound().Middleware(mux)))
	// README:end
}

// TestReadmeExampleIsCompiled: the README's first Go block is, line for
// line, the code between the markers of Example_readme, so the front page
// shows code the compiler has checked.
func TestReadmeExampleIsCompiled(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "README.md has a Go block")

	src, err := os.ReadFile("example_readme_test.go")
	require.NoError(t, err)
	body := string(src)
	body = body[strings.Index(body, "// README:begin\n")+len("// README:begin\n") : strings.Index(body, "\t// README:end")]
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	var shown []string
	for _, l := range strings.Split(strings.TrimRight(string(block[1]), "\n"), "\n") {
		if strings.HasPrefix(l, "import ") || strings.HasPrefix(l, "\t\"") || strings.HasPrefix(l, "\t_ \"") || l == ")" {
			continue // the import block the README shows above the code
		}
		shown = append(shown, l)
	}
	for len(shown) > 0 && shown[0] == "" {
		shown = shown[1:]
	}
	require.Equal(t, strings.Join(lines, "\n"), strings.Join(shown, "\n"))
}
