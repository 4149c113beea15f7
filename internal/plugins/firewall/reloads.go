package firewall

import (
	"context"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// WatchReloads sends on out each time firewalld announces a reload (its Reloaded
// signal, sent by `firewall-cmd --reload` and `systemctl reload firewalld` alike), which
// drops the runtime sources the firewalld backend bound and, with firewalld's iptables
// backend, every rule of the host. It runs until ctx ends; a send that would block is
// dropped (one pending signal says it all). subscribed is called once the bus delivers
// the signal (a reload from then on is seen). A bus that cannot be reached is an error,
// returned at once.
func WatchReloads(ctx context.Context, addr string, out chan<- struct{}, subscribed func()) error {
	conn, err := connect(ctx, addr)
	if err != nil {
		return fmt.Errorf("firewalld reloads: %w", err)
	}
	defer conn.Close()
	if err := conn.AddMatchSignalContext(ctx, dbus.WithMatchInterface(firewalldName), dbus.WithMatchMember("Reloaded")); err != nil {
		return fmt.Errorf("firewalld reloads: subscribe: %w", err)
	}
	signals := make(chan *dbus.Signal, 4)
	conn.Signal(signals)
	subscribed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case s, ok := <-signals:
			if !ok {
				return fmt.Errorf("firewalld reloads: bus %s closed the connection", addr)
			}
			if s.Name == firewalldName+".Reloaded" {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}
}
