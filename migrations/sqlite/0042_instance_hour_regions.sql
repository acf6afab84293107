-- The region an instance-hour ran in (CUR `product_region_code`, issue 42): a reservation or
-- an EC2 Instance Savings Plan covers the hours of its own region only, so the commitments'
-- advice is sized per region. Hours ingested before carry none until they are ingested
-- again (`ingest cur --force`); their advice then counts all regions' hours together.
ALTER TABLE instance_hours ADD COLUMN region TEXT NOT NULL DEFAULT '';
