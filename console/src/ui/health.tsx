import { unwrap } from "@engram/client";
import { useEffect, useState } from "preact/hooks";

import { useSession } from "../session";

/** A banner while the service reports itself degraded (a dependency down). */
export function HealthBanner() {
  const { api } = useSession();
  const [down, setDown] = useState<string[] | null>(null);
  useEffect(() => {
    let live = true;
    unwrap(api.api.GET("/v1/health")).then(
      (health) => {
        if (!live) return;
        const parts = (["redis", "postgres"] as const).filter((name) => health[name] === "down");
        setDown(health.status === "degraded" ? parts : null);
      },
      () => {
        if (live) setDown(null);
      },
    );
    return () => {
      live = false;
    };
  }, [api]);
  if (down === null) return null;
  return (
    <div role="status" class="banner">
      Engram is running degraded{down.length > 0 ? ` (${down.join(" and ")} unavailable)` : ""}: some answers may be
      incomplete and some changes may be refused. Nothing you already saved is lost.
    </div>
  );
}
