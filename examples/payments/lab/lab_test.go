package lab

import (
	"slices"
	"testing"
)

func TestCrashPlanIsDeterministicAndAboutTenPercent(t *testing.T) {
	a, b := CrashPlan(1000, 10), CrashPlan(1000, 10)
	if !slices.Equal(a, b) {
		t.Fatal("two crash plans of the same payments differ")
	}
	if len(a) < 70 || len(a) > 130 {
		t.Errorf("%d of 1000 first deliveries crash, want about 100", len(a))
	}
	if len(CrashPlan(1000, 0)) != 0 {
		t.Error("a 0% plan crashes deliveries")
	}
	// Attempts are independent draws: some crashed payments crash again on
	// their redelivery, most do not; and mode 3 gets both kinds of crash.
	again, after := 0, 0
	for _, id := range a {
		if c, _ := crashes(id, 2, 10); c {
			again++
		}
		if _, ac := crashes(id, 1, 10); ac {
			after++
		}
	}
	if again == 0 || again > len(a)/3 {
		t.Errorf("%d of %d crashed payments crash again on attempt 2, want about 10%%", again, len(a))
	}
	if after == 0 || after == len(a) {
		t.Errorf("%d of %d crashes fall after the commit, want some before and some after", after, len(a))
	}
}

func TestMoney(t *testing.T) {
	for n, want := range map[int]string{0: "0", 100: "100", 1000: "1,000", 110700: "110,700", 1000000: "1,000,000", -9700: "-9,700"} {
		if got := money(n); got != want {
			t.Errorf("money(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	good := Scoreboard{Results: []Result{
		{Mode: AtLeastOnce, Sent: 10, Duplicates: 2, CorrectTotal: 1000, LedgerTotal: 1200},
		{Mode: AckFirst, Sent: 10, Lost: 1, CorrectTotal: 1000, LedgerTotal: 900},
		{Mode: MarkerTransaction, Sent: 10, CorrectTotal: 1000, LedgerTotal: 1000, Markers: 10, MarkersNamingCharge: 10},
	}}
	if err := good.Check(); err != nil {
		t.Errorf("a scoreboard that shows the lesson fails its check: %v", err)
	}
	bad := good
	bad.Results = slices.Clone(good.Results)
	bad.Results[2].Duplicates = 1
	if bad.Check() == nil {
		t.Error("a duplicate in mode 3 passes the check")
	}
}
