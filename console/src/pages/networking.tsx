/** Networking: firewall rules with Check a packet (firewall.tsx), then VPNs and their peers (vpns.tsx). */
import { FirewallSection } from './firewall.tsx';
import { VpnSection } from './vpns.tsx';
import './storage-network.css';

export function NetworkingPage() {
  return (
    <section>
      <h1>Networking</h1>
      <FirewallSection />
      <VpnSection />
    </section>
  );
}
