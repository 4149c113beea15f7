package hostdevice

import "testing"

// TestIsPCIAddress pins the form sysfs names PCI functions by: four, two and two hex
// digits of domain, bus and device, and a function 0-7.
func TestIsPCIAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"0000:3b:00.1":  true,
		"ABCD:ef:1F.7":  true,
		"0000:3b:00.8":  false, // function beyond 7
		"0000:zz:00.0":  false,
		"g000:3b:00.1":  false,
		"0000:3b:0x.1":  false,
		"0000-3b:00.1":  false,
		"0000:3b-00.1":  false,
		"0000:3b:00:1":  false,
		"0000:3b:00.10": false,
		"3b:00.1":       false,
		"":              false,
	} {
		if got := isPCIAddress(s); got != want {
			t.Errorf("isPCIAddress(%q) = %v, want %v", s, got, want)
		}
	}
}
