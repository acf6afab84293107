-- Pods are kept one row per pod and UTC day, their hours packed (`KubePodDay`): a month of a
-- large cluster's 3.9 M pod-hours was 15 columns per hour through the driver, half a minute of
-- reading before its split (issue 41). `kube_pod_hours` is no longer written; the rows it holds
-- (months whose Prometheus data may be gone) stay, read beside the days, and are replaced when
-- their window is ingested again.
CREATE TABLE kube_pod_days (
    cluster TEXT NOT NULL DEFAULT '',
    namespace TEXT NOT NULL DEFAULT '',
    pod TEXT NOT NULL DEFAULT '',
    uid TEXT NOT NULL DEFAULT '',
    node TEXT NOT NULL DEFAULT '',
    workload TEXT NOT NULL DEFAULT '',
    workload_type TEXT NOT NULL DEFAULT '',
    labels TEXT NOT NULL DEFAULT '{}',
    day BIGINT NOT NULL,
    hours BLOB NOT NULL
);
CREATE INDEX kube_pod_days_day_idx ON kube_pod_days (day);
