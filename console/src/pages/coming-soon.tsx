/** The page of an area the console does not show yet (the API already offers it). */
export function comingSoon(area: string) {
  return function ComingSoonPage() {
    return (
      <section>
        <h1>{area}</h1>
        <p>
          The {area} page is coming to the console soon. Meanwhile the API, the SDK and the{' '}
          <code>nimbus</code> CLI offer everything about {area.toLowerCase()} (see the{' '}
          <a href="/docs">API reference</a>).
        </p>
      </section>
    );
  };
}
