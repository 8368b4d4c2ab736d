-- A person's edit of a pending proposal holds until it is reviewed.
--
-- The extraction job refreshes the key's pending row whenever it learns the key again (the
-- same transcript redelivered, or a later conversation). That overwrote a key or value an
-- admin or the owner had edited while the proposal waited, so the reviewer approved what the
-- extractor said, not what the person wrote. edited_at is set by a person's edit of the key
-- or value; a pending row with it set is not refreshed. A retention-archived row becomes a
-- proposal again whatever it was, and the refresh clears the mark.

ALTER TABLE memories ADD COLUMN edited_at timestamptz;
