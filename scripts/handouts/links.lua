-- Pandoc filter for the handouts.
--  * code blocks marked cuda are highlighted as C++ (pandoc has no CUDA syntax);
--  * links between handouts (lessons/NN_x/README.md, docs/*.md) point to the
--    rendered files: metadata "linkext" (html or pdf) for one-file-per-handout
--    output, or to in-document anchors when metadata "combined" is set;
--  * in combined mode, image paths are made absolute from metadata "srcdir",
--    and links to other repository files become plain text.
local ext = "html"
local combined = false
local srcdir = nil

local function target_name(t)
  local lesson = t:match("(%d%d_[%w_]+)/README%.md$") or t:match("^(%d%d_[%w_]+)/$")
  if lesson then return lesson end
  local doc = t:match("docs/([%w%-]+)%.md$") or (not t:find("/") and t:match("^([%w%-]+)%.md$"))
  if doc and doc ~= "README" then return "docs-" .. doc end
  if doc == "README" or t:match("docs/README%.md$") or t:match("^docs/?$") or t:match("%.%./docs/?$") then
    return "docs-README"
  end
  return nil
end

function Meta(m)
  if m.linkext then ext = pandoc.utils.stringify(m.linkext) end
  if m.combined then combined = true end
  if m.srcdir then srcdir = pandoc.utils.stringify(m.srcdir) end
end

function CodeBlock(b)
  for i, c in ipairs(b.classes) do
    if c == "cuda" or c == "cu" then b.classes[i] = "cpp" end
  end
  return b
end

function Link(l)
  local t = l.target
  if t:match("^%a+://") or t:match("^mailto:") or t:match("^#") then return l end
  local name = target_name(t)
  if name then
    if combined then l.target = "#h-" .. name else l.target = name .. "." .. ext end
    return l
  end
  if combined then return l.content end
  return l
end

function Image(img)
  if combined and srcdir and not img.src:match("^/") and not img.src:match("^%a+://") then
    img.src = srcdir .. "/" .. img.src
  end
  return img
end

return { { Meta = Meta }, { CodeBlock = CodeBlock, Link = Link, Image = Image } }
