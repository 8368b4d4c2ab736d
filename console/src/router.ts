import { useEffect, useState } from "preact/hooks";

/** The console's pages live in the URL's hash (`#/review`), so any static host serves them. */
export type Route = "memory" | "review" | "settings" | "unknown";

export function routeOf(hash: string): Route {
  const path = hash.replace(/^#/, "").replace(/\/+$/, "") || "/";
  if (path === "/" || path === "/memory") return "memory";
  if (path === "/review") return "review";
  if (path === "/settings") return "settings";
  return "unknown";
}

export function useRoute(): Route {
  const [route, setRoute] = useState<Route>(() => routeOf(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(routeOf(window.location.hash));
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}
