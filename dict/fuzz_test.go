package dict_test

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/balde-throttle/balde/dict"
)

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"11144477735", "11222333000181", "12ABC34501DE35", "+5561988880000", "maria.souza@example.com",
		"123e4567-e89b-12d3-a456-426614174000", "", "+", "@", "11111111111", strings.Repeat("a", 70) + "@b.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := dict.ParseKey(s)
		if err != nil {
			return
		}
		if k.Value != s {
			t.Fatalf("ParseKey(%q) changed the key to %q", s, k.Value)
		}
		again, err := dict.ParseKeyAs(k.Type, s)
		if err != nil || again != k {
			t.Fatalf("ParseKeyAs(%s, %q) = %v, %v; ParseKey said valid", k.Type, s, again, err)
		}
		switch k.Type {
		case dict.KeyCPF:
			if len(s) != 11 {
				t.Fatalf("CPF %q", s)
			}
		case dict.KeyCNPJ:
			if len(s) != 14 {
				t.Fatalf("CNPJ %q", s)
			}
		case dict.KeyEmail:
			if len(s) > dict.MaxEmailLen || strings.ToLower(s) != s {
				t.Fatalf("EMAIL %q", s)
			}
		case dict.KeyPhone:
			if len(s) > 16 || s[0] != '+' {
				t.Fatalf("PHONE %q", s)
			}
		case dict.KeyEVP:
			if len(s) != 36 {
				t.Fatalf("EVP %q", s)
			}
		}
	})
}

// cnpjCheck is an independent implementation of the CNPJ check digits
// (weights listed, not computed) to compare ValidateCNPJ against.
func cnpjCheck(s string) bool {
	if len(s) != 14 {
		return false
	}
	for i := 0; i < 14; i++ {
		c := s[i]
		if !(c >= '0' && c <= '9') && !(i < 12 && c >= 'A' && c <= 'Z') {
			return false
		}
	}
	if strings.Count(s, s[:1]) == 14 {
		return false
	}
	w1 := []int{5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	w2 := []int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	dv := func(w []int) int {
		sum := 0
		for i, x := range w {
			sum += (int(s[i]) - 48) * x
		}
		if r := sum % 11; r > 1 {
			return 11 - r
		}
		return 0
	}
	return int(s[12]-'0') == dv(w1) && int(s[13]-'0') == dv(w2)
}

func FuzzParseCNPJ(f *testing.F) {
	for _, s := range []string{"11222333000181", "12ABC34501DE35", "12ABC34501DE36", "00000000000000", "AAAAAAAAAAAA00", "12abc34501de35", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := dict.ValidateCNPJ(s) == nil
		if want := cnpjCheck(s); got != want {
			t.Fatalf("ValidateCNPJ(%q) valid = %t, want %t", s, got, want)
		}
		if got {
			// One wrong check digit is always caught.
			b := []byte(s)
			b[13] = '0' + (b[13]-'0'+1)%10
			if dict.ValidateCNPJ(string(b)) == nil {
				t.Fatalf("ValidateCNPJ accepted %q after a change of check digit", b)
			}
		}
	})
}

func FuzzParseCPF(f *testing.F) {
	for _, s := range []string{"11144477735", "52998224725", "52998224726", "00000000000", "1114447773", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if dict.ValidateCPF(s) != nil {
			return
		}
		b := []byte(s)
		b[10] = '0' + (b[10]-'0'+1)%10
		if dict.ValidateCPF(string(b)) == nil {
			t.Fatalf("ValidateCPF accepted %q and %q", s, b)
		}
		if p, err := dict.ParsePayerID(s); err != nil || p != dict.PF {
			t.Fatalf("ParsePayerID(%q) = %s, %v", s, p, err)
		}
	})
}

func FuzzDecodeProblem(f *testing.F) {
	f.Add(mustRead(f, "testdata/problem_entry_not_found.golden.xml"))
	f.Add([]byte(`<problem xmlns="urn:ietf:rfc:7807"><type>x</type><title>t</title><status>429</status></problem>`))
	f.Add([]byte(`<problem><type>x</type></problem>`))
	f.Add([]byte(`<?xml version="1.0" encoding="ISO-8859-1"?><problem xmlns="urn:ietf:rfc:7807"/>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := dict.DecodeProblem(data)
		if err != nil {
			return
		}
		out, err := dict.Marshal(p)
		if err != nil {
			t.Fatalf("marshal a decoded problem: %v", err)
		}
		again, err := dict.DecodeProblem(out)
		if err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("round trip changed the problem: %+v then %+v", p, again)
		}
	})
}

func FuzzDecodeListPolicies(f *testing.F) {
	f.Add(mustRead(f, "testdata/list_policies_response.xml"))
	f.Add(mustRead(f, "testdata/get_policy_response.xml"))
	f.Add([]byte(`<ListPoliciesResponse><Policies><Policy><AvailableTokens>-15</AvailableTokens></Policy></Policies></ListPoliciesResponse>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r dict.ListPoliciesResponse
		if err := dict.Unmarshal(data, &r); err != nil {
			return
		}
		out, err := dict.Marshal(&r)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var again dict.ListPoliciesResponse
		if err := dict.Unmarshal(out, &again); err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		out2, err := dict.Marshal(&again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", out, out2)
		}
	})
}

func FuzzParsePolicyFile(f *testing.F) {
	f.Add(mustRead(f, "testdata/policies/pix_entity.json"))
	f.Add([]byte(`{"dict": {"refill": "continuous", "policies": {"ENTRIES_READ_USER_ANTISCAN": {"classes": {"PF": {"capacity": 50}}}}}}`))
	f.Add([]byte(`{"dict": {"policies": {"X": {"scope": "USER", "classes": {"PF": {"capacity": 1, "refill_tokens": 1, "refill_period": "1d"}}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := dict.ParsePolicyFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		c := dict.NewCatalog("prod")
		if err := c.Apply(pf); err != nil {
			return
		}
		// Every policy of a catalog that accepted the file resolves.
		for _, s := range c.Specs() {
			id := "x"
			switch s.Scope {
			case dict.ScopePSP:
				id = ispb
			case dict.ScopeUser:
				id = cpfPF
			}
			p, err := c.Resolve(c.Key(s.Name, id))
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
		}
	})
}

func mustRead(f *testing.F, path string) []byte {
	f.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
